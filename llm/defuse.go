package llm

import (
	"regexp"
	"strings"
)

var (
	// markerRe matches text posing as one of npcd's own markers.
	markerRe = regexp.MustCompile(`(?i)\[\s*(context\s+summary|working\s+context|now|system)\s*\]`)
	// tagRe matches anything a reader could take for a prompt tag: an
	// opening or closing angle-bracket tag, with or without attributes.
	tagRe = regexp.MustCompile(`<\s*/?\s*([A-Za-z_][^<>]*)>`)
)

// Defuse neutralizes text from outside npcd — what players and the game
// send, what the model wrote (its replies and tool calls echo players), and
// what npcd stored from them (summaries, journal entries, memories) — before
// it enters any prompt. Markers such as [CONTEXT SUMMARY] become
// "(context summary)" and tags such as <pinned> or </transcript> become
// "(pinned)", "(transcript)", so such text can only ever read as words, never
// as the prompt's own structure. Everything else is kept as written.
// Defuse(Defuse(s)) == Defuse(s).
func Defuse(s string) string {
	// Most texts hold brackets (every perceived line starts with its
	// time) but nothing to defuse: matching allocates nothing, replacing does.
	if !strings.ContainsAny(s, "[<") || (!markerRe.MatchString(s) && !tagRe.MatchString(s)) {
		return s
	}
	// Replacing one match can make a new one (<a<b>> becomes <a(b)>), so
	// repeat until nothing matches; every pass removes brackets, so this ends.
	for {
		t := markerRe.ReplaceAllStringFunc(s, func(m string) string {
			return "(" + strings.Join(strings.Fields(strings.ToLower(strings.Trim(m, "[]"))), " ") + ")"
		})
		t = tagRe.ReplaceAllStringFunc(t, func(m string) string {
			return "(" + strings.TrimSpace(strings.TrimLeft(strings.Trim(m, "<>"), " \t\r\n/")) + ")"
		})
		if t == s {
			return s
		}
		s = t
	}
}
