package inspect

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExtract(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		text string
		want []found
	}{
		{"name mid-sentence", "I saw Tobias yesterday.", []found{{"Tobias", KindName}}},
		{"sentence start is skipped", "Tobias left. Then Mira came.", []found{{"Mira", KindName}}},
		{"phrase with connectors", "He joined the Order of the Silver Hand last spring.", []found{{"Order of the Silver Hand", KindName}}},
		{"place after a preposition", "We met at the Rusty Anchor, then rode to Westmarch.",
			[]found{{"Rusty Anchor", KindPlace}, {"Westmarch", KindPlace}}},
		{"pronoun and interjections are not names", "Well, I think so. Aye, OK then.", nil},
		{"number with its unit", "He owes me 40 gold and 3 days of work.", []found{{"40 gold", KindNumber}, {"3 days", KindNumber}}},
		{"bare numbers need two digits", "Door 7, then door 12.", []found{{"12", KindNumber}}},
		{"decimals, thousands and times stay whole", "It weighs 3.5 stone, costs 1,200 crowns, at 10:30.",
			[]found{{"3.5 stone", KindNumber}, {"1,200 crowns", KindNumber}, {"10:30", KindNumber}}},
		{"stamps and references are bookkeeping", "[2026-11-21 10:02] alice says: see message 123 (importance 8, 2026-11-21) on tick 40, #12.", nil},
		{"short quote", `The password is "iron tide", he said.`, []found{{"iron tide", KindQuote}}},
		{"whole quoted sentences are not quotes", `alice says: "I lost my sword at the forge."`, []found{{"sword", KindThing}}},
		{"long quotes are not quotes", `"one two three four five" is too long`, nil},
		{"curly quotes", "Ask for “the red door” at night.", []found{{"the red door", KindQuote}}},
		{"hyphen and apostrophe stay in the word", "We met O'Brien and Anne-Marie there.", []found{{"O'Brien", KindName}, {"Anne-Marie", KindName}}},
		{"after an opening quote is a sentence start", `He said "Tobias is late" again.`, []found{{"Tobias is late", KindQuote}}},
		{"lines are sentences", "Hello\nTobias came\nand Mira too", []found{{"Mira", KindName}}},
		{"numbers written as words, with their unit", "I'll pay forty silver, or two dozen nails, or twenty-five gold.",
			[]found{{"forty silver", KindNumber}, {"two dozen nails", KindNumber}, {"twenty-five gold", KindNumber}}},
		{"a number word without a unit is no detail", "Those three are here. No one came. Give me two.", nil},
		{"what someone owns", "My ring is gone and I lost my old sword at the forge; her cloak too.",
			[]found{{"ring", KindThing}, {"sword", KindThing}, {"cloak", KindThing}}},
		{"possessives of no thing", "On my way, in my own mind, by my word.", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := extract(tt.text)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(found{})); diff != "" {
				t.Errorf("extract(%q) (-want +got):\n%s", tt.text, diff)
			}
		})
	}
}

func TestContainsWord(t *testing.T) {
	t.Parallel()
	tests := []struct {
		haystack, needle string
		want             bool
	}{
		{"tobias owes me", "tobias", true},
		{"tobiasson owes me", "tobias", false},
		{"he paid 120 gold", "20 gold", false},
		{"he paid 20 gold coins", "20 gold", true},
		{"at the grey harbor.", "grey harbor", true},
		{"x grey harbors", "grey harbor", false},
		{"mira, then mira", "mira", true},
		{"amira and mira", "mira", true},
		{"", "mira", false},
		{"mira", "", false},
		{"café noir", "café", true},
	}
	for _, tt := range tests {
		if got := containsWord(tt.haystack, tt.needle); got != tt.want {
			t.Errorf("containsWord(%q, %q) = %v, want %v", tt.haystack, tt.needle, got, tt.want)
		}
	}
}
