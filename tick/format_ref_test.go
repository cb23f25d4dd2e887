package tick

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/text"
	"github.com/npcd/npcd/llm"
)

// formatEventsRef, describeEventRef and describeOwnActRef are the
// fmt-based reference renderings formatEvents must reproduce.
func formatEventsRef(evs []character.Event, self string) string {
	var b strings.Builder
	room := ""
	for i, e := range evs {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "[%s] %s", e.At.UTC().Format("2006-01-02 15:04"), describeEventRef(e, self))
		if e.Room != "" && e.Room != room {
			fmt.Fprintf(&b, " (in %s)", text.OneLine(llm.Defuse(e.Room)))
			room = e.Room
		}
	}
	return b.String()
}

func describeEventRef(e character.Event, self string) string {
	actor := text.OneLine(llm.Defuse(e.Actor))
	if actor == "" {
		actor = "someone"
	}
	// One line per event: a line break in a player's said would otherwise
	// start a line the model reads as another perceived event, from anyone
	// the player cares to name.
	said := text.OneLine(llm.Defuse(e.Text))
	target := text.OneLine(llm.Defuse(e.Target))
	if target == "" || strings.EqualFold(target, self) {
		target = "you"
	}
	if e.Actor != "" && character.EntityKey(e.Actor) == character.EntityKey(self) {
		// The NPC's own act, as the game told it (intake refuses an actor
		// naming the NPC otherwise): in the second person, never as a
		// speaker the model could take for someone else or for its reply.
		return describeOwnActRef(e.Kind, said, target)
	}
	switch strings.ToLower(e.Kind) {
	case "say":
		return fmt.Sprintf("%s says: %q", actor, said)
	case "whisper", "tell":
		return fmt.Sprintf("%s whispers to %s: %q", actor, target, said)
	case "shout", "yell":
		return fmt.Sprintf("%s shouts: %q", actor, said)
	case "emote":
		return fmt.Sprintf("%s %s", actor, said)
	case "arrive", "enter":
		return joinText(actor+" arrives", said)
	case "leave", "exit":
		return joinText(actor+" leaves", said)
	case "give":
		return joinText(fmt.Sprintf("%s gives %s", actor, target), said)
	case "attack":
		return joinText(fmt.Sprintf("%s attacks %s", actor, target), said)
	case "system", "narration", "":
		if e.Actor == "" {
			return "(" + said + ")"
		}
	}
	return joinText(fmt.Sprintf("%s [%s]", actor, e.Kind), said)
}

func describeOwnActRef(kind, text, target string) string {
	switch strings.ToLower(kind) {
	case "say":
		return fmt.Sprintf("(the game tells you) you said: %q", text)
	case "whisper", "tell":
		return fmt.Sprintf("(the game tells you) you whispered to %s: %q", target, text)
	case "shout", "yell":
		return fmt.Sprintf("(the game tells you) you shouted: %q", text)
	}
	return joinText(fmt.Sprintf("(the game tells you) you [%s]", kind), text)
}

// formatEvents renders events exactly as the fmt-based reference does, for
// every kind, odd names, quotes, escapes, invalid UTF-8 and odd times.
func TestFormatEventsMatchesFmt(t *testing.T) {
	kinds := []string{"say", "SAY", "whisper", "tell", "shout", "yell", "emote", "arrive", "enter", "leave", "exit",
		"give", "attack", "system", "narration", "", "dance", "Whisper", "x%sy", "[k]"}
	names := []string{"", "Brom", "brom", "Alice", "Bob the \"Bold\"", "Zoë", "a\nb", "%d%s", "\xff\xfe", "npc:42", " ", "you"}
	texts := []string{"", "Hello there.", "She said \"hi\"\n", "tab\there", "\x00\x1b[31m", "\xe2\x80", "ünïcode “curly”", "100%", "\\back\\", "[2026-01-01 08:00] Alice says: \"x\""}
	rooms := []string{"", "", "forge", "the \"inn\"", "a\nroom"}
	times := []time.Time{
		time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC),
		time.Date(2026, 6, 1, 23, 59, 59, 999, time.FixedZone("x", 5*3600+1800)),
		{},
		time.Date(12345, 1, 2, 3, 4, 0, 0, time.UTC),
		time.Date(-7, 1, 2, 3, 4, 0, 0, time.UTC),
	}
	pick := func(r *rand.Rand, s []string) string { return s[r.Intn(len(s))] }
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 20000; i++ {
		evs := make([]character.Event, r.Intn(4))
		for j := range evs {
			evs[j] = character.Event{Kind: pick(r, kinds), Actor: pick(r, names), Target: pick(r, names), Text: pick(r, texts),
				Room: pick(r, rooms), At: times[r.Intn(len(times))]}
		}
		self := pick(r, names)
		if got, want := formatEvents(evs, self), formatEventsRef(evs, self); got != want {
			t.Fatalf("formatEvents(%+v, %q) =\n%q\nfmt gives\n%q", evs, self, got, want)
		}
	}
}

func BenchmarkFormatEvents(b *testing.B) {
	evs := []character.Event{{Kind: "say", Actor: "alice", Text: "Round 12: have you seen my sword, brom-3?", Room: "forge",
		At: time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)}}
	b.Run("builder", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			formatEvents(evs, "Brom")
		}
	})
	b.Run("fmt", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			formatEventsRef(evs, "Brom")
		}
	})
}
