package tunnel

import (
	"strings"
	"testing"

	"github.com/bondd/bondd/policy"
	"github.com/bondd/bondd/rules"
	"github.com/bondd/bondd/tunnel/ctrlmsg"
)

func TestRuleLimits(t *testing.T) {
	m := &ctrlmsg.MappingRule{Op: ctrlmsg.OpInstall, ID: "r", Actions: []ctrlmsg.RuleAction{{Name: "priority", Value: "1"}}}
	if why := ruleLimits(m); why != "" {
		t.Fatal(why)
	}
	m.Match = make([]ctrlmsg.RuleMatch, rules.MaxMatchEntries+1)
	if ruleLimits(m) == "" {
		t.Fatal("11 match entries passed")
	}
	m.Match = []ctrlmsg.RuleMatch{{Key: "k", Op: ctrlmsg.MatchEquals, Value: strings.Repeat("v", rules.MaxValueBytes+1)}}
	if ruleLimits(m) == "" {
		t.Fatal("long value passed")
	}
	m.Match = nil
	m.Actions = make([]ctrlmsg.RuleAction, rules.MaxActions+1)
	if ruleLimits(m) == "" {
		t.Fatal("21 actions passed")
	}
	m.Actions = []ctrlmsg.RuleAction{{Name: "fec", Params: []ctrlmsg.RuleParam{{Key: strings.Repeat("k", rules.MaxKeyBytes+1), Value: "1"}}}}
	if ruleLimits(m) == "" {
		t.Fatal("long param key passed")
	}
}

func TestTruncateReason(t *testing.T) {
	s := strings.Repeat("é", ctrlmsg.MaxReasonLen) // 2 bytes each
	got := truncateReason(s)
	if len(got) > ctrlmsg.MaxReasonLen || !strings.HasPrefix(s, got) || len(got) < ctrlmsg.MaxReasonLen-1 {
		t.Fatalf("len %d", len(got))
	}
}

// TestStatusNames checks that the status names of a state report are the
// names of policy.Status, which the edge sends and the concentrator
// compares.
func TestStatusNames(t *testing.T) {
	for st, name := range map[policy.Status]string{
		policy.StatusActive:      ctrlmsg.StatusActive,
		policy.StatusDegraded:    ctrlmsg.StatusDegraded,
		policy.StatusUnavailable: ctrlmsg.StatusUnavailable,
	} {
		if st.String() != name {
			t.Errorf("policy status %q, control message status %q", st, name)
		}
	}
}
