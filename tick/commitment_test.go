package tick

import (
	"testing"
)

// Only what the NPC says in its own words commits it: a promise it quotes
// from someone else, closed or cut off mid-quote, is their words.
func TestOwnCommitmentIgnoresQuotes(t *testing.T) {
	own := func(text string) bool { return commitmentRe.MatchString(quotedRe.ReplaceAllString(text, "")) }
	for _, tt := range []struct {
		text string
		want bool
	}{
		{"I'll have your horseshoe ready by tomorrow.", true},
		{"Aye, I owe you one, Bob.", true},
		{`Alice, I remember: [2026-06-01 08:00] Alice says: "I need a new horseshoe by tomorrow."`, false},
		{`Dunstan, I remember: Alice says: "I need a new horseshoe for my mare by tomorrow…`, false},
		{`You said "I promise", Bob, and I'll hold you to it.`, true},
		{"Fine weather for the fair.", false},
	} {
		if got := own(tt.text); got != tt.want {
			t.Errorf("own commitment in %q = %v, want %v", tt.text, got, tt.want)
		}
	}
}
