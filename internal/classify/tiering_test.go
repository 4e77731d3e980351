package classify

import (
	"fmt"
	"slices"
	"testing"
)

func TestTieringOrder(t *testing.T) {
	tr := Tiering{Cheap: "haiku", Middle: "sonnet", Strong: "opus"}
	for _, tc := range []struct {
		tier int
		want []string
	}{
		{0, []string{"haiku", "sonnet", "opus"}},
		{1, []string{"sonnet", "opus", "haiku"}},
		{2, []string{"opus", "sonnet", "haiku"}},
	} {
		t.Run(TierNames[tc.tier], func(t *testing.T) {
			if got := tr.Order(tc.tier); !slices.Equal(got, tc.want) {
				t.Errorf("(-got +want)\n-%v\n+%v", got, tc.want)
			}
		})
	}
	// One model in two tiers appears once in a route.
	same := Tiering{Cheap: "a", Middle: "a", Strong: "b"}
	if got, want := same.Order(0), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("shared model (-got +want)\n-%v\n+%v", got, want)
	}
	if got, want := same.AliasModels(), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("AliasModels (-got +want)\n-%v\n+%v", got, want)
	}
	if got, want := tr.AliasModels(), []string{"sonnet", "opus", "haiku"}; !slices.Equal(got, want) {
		t.Errorf("AliasModels (-got +want)\n-%v\n+%v", got, want)
	}
}

func TestTieringCheck(t *testing.T) {
	known := func(m string) bool { return m == "a" || m == "b" || m == "c" }
	for _, tc := range []struct {
		name string
		tr   Tiering
		want string
	}{
		{"ok", Tiering{Cheap: "a", Middle: "b", Strong: "c"}, "<nil>"},
		{"no middle", Tiering{Cheap: "a", Strong: "c"}, `alias "x": tiering names no middle model`},
		{"unknown strong", Tiering{Cheap: "a", Middle: "b", Strong: "z"}, `alias "x": tiering names unknown model "z"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(tc.tr.Check("x", known)); got != tc.want {
				t.Errorf("(-got +want)\n-%s\n+%s", got, tc.want)
			}
		})
	}
}

func TestTierAndEscalation(t *testing.T) {
	for c, want := range map[Complexity]int{Simple: 0, Medium: 1, Complex: 2, Complexity(-1): 0, Complexity(7): 2} {
		if got := Tier(c); got != want {
			t.Errorf("Tier(%v) = %d, want %d", c, got, want)
		}
	}
	esc := Tiering{Escalate: true}
	for _, tc := range []struct {
		tr    Tiering
		from  int
		to    int
		moved bool
	}{
		{esc, 0, 1, true},
		{esc, 1, 2, true},
		{esc, 2, 2, false},
		{Tiering{}, 0, 0, false},
	} {
		if to, ok := tc.tr.Escalation(tc.from); to != tc.to || ok != tc.moved {
			t.Errorf("escalate=%v from %d: %d %v, want %d %v", tc.tr.Escalate, tc.from, to, ok, tc.to, tc.moved)
		}
	}
}
