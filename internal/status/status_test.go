package status

import "testing"

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.00 KiB"}, {1536, "1.50 KiB"}, {10 << 10, "10.0 KiB"},
		{999 << 10, "999 KiB"}, {1 << 20, "1.00 MiB"}, {5 << 30, "5.00 GiB"}, {2048 << 40, "2048 TiB"},
	} {
		if got := formatBytes(tc.n); got != tc.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}
