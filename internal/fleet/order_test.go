package fleet

import (
	"fmt"
	"slices"
	"testing"
)

func edgeIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("van-%d", i)
	}
	return ids
}

func TestOrderDeterministic(t *testing.T) {
	nodes := []string{"c1.example.net:4433", "c2.example.net:4433", "c3.example.net:4433"}
	for _, id := range edgeIDs(50) {
		a := Order(id, nodes)
		b := Order(id, []string{nodes[2], nodes[0], nodes[1]})
		if !slices.Equal(a, b) {
			t.Fatalf("%s: order depends on the list's order: %v vs %v", id, a, b)
		}
		if len(a) != 3 || !slices.Contains(a, nodes[0]) || !slices.Contains(a, nodes[1]) || !slices.Contains(a, nodes[2]) {
			t.Fatalf("%s: %v is not a permutation of %v", id, a, nodes)
		}
	}
	if got := Order("x", nil); len(got) != 0 {
		t.Errorf("Order of no nodes = %v", got)
	}
	// Duplicate names are kept and break the tie by name.
	if got := Order("x", []string{"a", "a"}); !slices.Equal(got, []string{"a", "a"}) {
		t.Errorf("Order with duplicates = %v", got)
	}
}

// TestOrderStable: adding a node moves only the edges that now have it as
// home; removing one moves only its own edges, each to its second choice.
func TestOrderStable(t *testing.T) {
	ids := edgeIDs(1000)
	three := []string{"n1", "n2", "n3"}
	four := append(slices.Clone(three), "n4")
	moved := 0
	for _, id := range ids {
		before, after := Order(id, three), Order(id, four)
		if before[0] != after[0] {
			moved++
			if after[0] != "n4" {
				t.Fatalf("%s moved from %s to %s when n4 was added", id, before[0], after[0])
			}
		}
		// Removing n2: edges homed elsewhere stay; n2's edges go to their second choice.
		without := Order(id, []string{"n1", "n3"})
		switch {
		case before[0] != "n2" && without[0] != before[0]:
			t.Fatalf("%s moved from %s to %s when n2 was removed", id, before[0], without[0])
		case before[0] == "n2" && without[0] != before[1]:
			t.Fatalf("%s was on n2 and went to %s, not its second choice %s", id, without[0], before[1])
		}
	}
	// About a quarter of the edges move to the new node (binomial, 1000 × 1/4 = 250 ± 14).
	if moved < 200 || moved > 300 {
		t.Errorf("adding a 4th node moved %d of 1000 edges, want 250 ± 50", moved)
	}
}

// TestOrderSpread: 1000 edges over 3 nodes land within ±15 % of 333 each
// (the binomial standard deviation is 15 edges; ±50 is beyond 3σ, and the
// hash is fixed, so this cannot flake).
func TestOrderSpread(t *testing.T) {
	nodes := []string{"10.0.0.1:4433", "10.0.0.2:4433", "10.0.0.3:4433"}
	count := map[string]int{}
	second := map[[2]string]int{}
	for _, id := range edgeIDs(1000) {
		o := Order(id, nodes)
		count[o[0]]++
		second[[2]string{o[0], o[1]}]++
	}
	for _, n := range nodes {
		if c := count[n]; c < 283 || c > 383 {
			t.Errorf("node %s is home to %d of 1000 edges, want 333 ± 50 (all: %v)", n, c, count)
		}
	}
	// When a node fails, its edges spread over the others too: each
	// (home, second) pair holds about 1000/6 edges.
	for pair, c := range second {
		if c < 117 || c > 217 {
			t.Errorf("%d edges have order %v, want 167 ± 50", c, pair)
		}
	}
	t.Logf("homes: %v", count)
}

func TestWeightSeparatesConcatenation(t *testing.T) {
	if Weight("ab", "c") == Weight("a", "bc") {
		t.Error(`Weight("ab","c") == Weight("a","bc")`)
	}
}
