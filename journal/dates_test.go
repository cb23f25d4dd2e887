package journal

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestGroundDates(t *testing.T) {
	// Monday 8 May 2023, 13:56.
	at := time.Date(2023, 5, 8, 13, 56, 0, 0, time.UTC)
	sat := time.Date(2023, 5, 13, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		at         time.Time
		text, want string
	}{
		{at, "I went to a support group yesterday.", "I went to a support group yesterday [7 May 2023]."},
		{at, "Today was long", "Today [8 May 2023] was long"},
		{at, "see you tomorrow", "see you tomorrow [9 May 2023]"},
		{at, "tonight and this morning", "tonight [8 May 2023] and this morning [8 May 2023]"},
		{at, "last night was loud", "last night [7 May 2023] was loud"},
		{at, "the day before yesterday", "the day before yesterday [6 May 2023]"},
		{at, "The day after tomorrow", "The day after tomorrow [10 May 2023]"},
		{at, "Last Friday we met", "Last Friday [5 May 2023] we met"},
		{at, "last Monday", "last Monday [1 May 2023]"},
		{at, "this past Sunday", "this past Sunday [7 May 2023]"},
		{at, "next Friday", "next Friday [12 May 2023]"},
		{at, "next Monday", "next Monday [15 May 2023]"},
		{at, "this coming Tuesday", "this coming Tuesday [9 May 2023]"},
		{at, "this Wednesday", "this Wednesday [10 May 2023]"},
		{at, "two weeks ago", "two weeks ago [week of 24 April 2023]"},
		{at, "3 days ago", "3 days ago [5 May 2023]"},
		{at, "a week ago", "a week ago [week of 1 May 2023]"},
		{at, "a couple of days ago", "a couple of days ago [6 May 2023]"},
		{at, "a month ago", "a month ago [April 2023]"},
		{at, "four years ago", "four years ago [2019]"},
		{at, "in two weeks", "in two weeks [week of 22 May 2023]"},
		{at, "in 3 days", "in 3 days [11 May 2023]"},
		{at, "two months from now", "two months from now [July 2023]"},
		{at, "last week", "last week [week of 1 May 2023]"},
		{at, "this week", "this week [week of 8 May 2023]"},
		{at, "next week", "next week [week of 15 May 2023]"},
		{at, "last weekend", "last weekend [weekend of 6 May 2023]"},
		{at, "this weekend", "this weekend [weekend of 13 May 2023]"},
		{sat, "this weekend", "this weekend [weekend of 13 May 2023]"},
		{sat, "last weekend", "last weekend [weekend of 6 May 2023]"},
		{sat, "next weekend", "next weekend [weekend of 20 May 2023]"},
		{at, "last month", "last month [April 2023]"},
		{at, "next month", "next month [June 2023]"},
		{time.Date(2023, 12, 20, 0, 0, 0, 0, time.UTC), "next month", "next month [January 2024]"},
		{time.Date(2023, 1, 3, 0, 0, 0, 0, time.UTC), "last month", "last month [December 2022]"},
		{at, "last year", "last year [2022]"},
		{at, "next year", "next year [2024]"},
		// Vague or not a time: unchanged.
		{at, "a few days ago", "a few days ago"},
		{at, "recently", "recently"},
		{at, "on Friday", "on Friday"},
		{at, "the last day", "the last day"},
		{at, "next to the week's end", "next to the week's end"},
		{at, "yesterdays", "yesterdays"},
		{at, "over the last year", "over the last year"},
		{at, "The next week was quiet", "The next week was quiet"},
		{at, "the day before yesterday", "the day before yesterday [6 May 2023]"},
		{at, "", ""},
		// Idempotent.
		{at, "yesterday [7 May 2023] we met", "yesterday [7 May 2023] we met"},
		// A stamped line is read against its stamp.
		{at, "[2023-05-20 09:00] Ann says: \"I left yesterday\"\nBo: yesterday too",
			"[2023-05-20 09:00] Ann says: \"I left yesterday [19 May 2023]\"\nBo: yesterday [7 May 2023] too"},
		{time.Time{}, "yesterday", "yesterday"},
	}
	for _, c := range cases {
		got := GroundDates(c.text, c.at)
		if got != c.want {
			t.Errorf("GroundDates(%q, %s) = %q, want %q", c.text, c.at.Format("Mon 2006-01-02"), got, c.want)
		}
		if again := GroundDates(got, c.at); again != got {
			t.Errorf("grounding %q again gave %q", got, again)
		}
	}
}

func TestStoreGroundsWhatItWrites(t *testing.T) {
	e := newEnv(t)
	e.npc(t, "npc", t0)
	ctx := context.Background()
	at := time.Date(2023, 5, 8, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		s    *Store
		want string
	}{
		{"grounding", e.jour, "left yesterday [7 May 2023]"},
		{"keeping relative dates", e.jour.KeepingRelativeDates(), "left yesterday"},
		{"keeping relative dates in a transaction", e.jour.KeepingRelativeDates().WithTx(e.db), "left yesterday"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			en := &Entry{Type: TypeNote, Content: "left yesterday", GameTime: at}
			if err := tc.s.Add(ctx, "npc", en); err != nil {
				t.Fatal(err)
			}
			m := &Memory{Content: "left yesterday", GameTime: at}
			if _, err := tc.s.AddMemory(ctx, "npc", m); err != nil {
				t.Fatal(err)
			}
			got, err := e.jour.Get(ctx, "npc", en.ID)
			if err != nil || got.Content != tc.want {
				t.Fatalf("entry %q %v, want %q", got.Content, err, tc.want)
			}
			mem, err := e.jour.Memory(ctx, "npc", m.ID)
			if err != nil || mem.Content != tc.want || mem.ContentHash != ContentHash(tc.want) {
				t.Fatalf("memory %q (hash %s) %v, want %q", mem.Content, mem.ContentHash, err, tc.want)
			}
		})
	}
}

// mayBeRelative says what relativeHint says, on texts of its words in any
// case, inside longer words, beside digits, underscores and punctuation,
// and with non-ASCII letters that fold to ASCII ones.
func TestMayBeRelativeIsTheHint(t *testing.T) {
	atoms := []string{"yesterday", "TODAY", "Tonight", "tomorrow", "last", "next", "this", "day", "Days", "week", "weeks", "month", "MONTHS",
		"year", "years", "yesterdays", "lastly", "thistle", "midday", "weekend", "_day", "day_", "7days", "days7", "thiſ", "laſt", "weeK",
		"wee\u212a", "é", "the", "forge", "12", " ", "  ", ".", ",", "-", "'", "[", "]", "\n", "\t"}
	r := rand.New(rand.NewPCG(2, 3))
	texts := []string{"", "day", "x", "days ago"}
	for range 30000 {
		var b strings.Builder
		for range 1 + r.IntN(8) {
			b.WriteString(atoms[r.IntN(len(atoms))])
		}
		texts = append(texts, b.String())
	}
	for _, s := range texts {
		if got, want := mayBeRelative(s), relativeHint.MatchString(s); got != want {
			t.Fatalf("mayBeRelative(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}
