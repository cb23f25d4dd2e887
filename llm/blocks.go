package llm

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// Tags that delimit the parts of summarize and extract prompts. Prompt
// builders wrap the parts with Blocks; the builtin model reads them back
// with BlockOf. Remote models see them as plain XML-like sections.
const (
	TagPreviousSummary = "previous_summary"
	TagPinned          = "pinned"
	TagTranscript      = "transcript"
	TagInstruction     = "instruction"
	TagEntries         = "entries"
	TagKnown           = "known"
)

// Part is one tagged section of a prompt.
type Part struct {
	Tag  string
	Body string
}

// Blocks renders parts as the whole text of one prompt message, each as
// <tag-NONCE> … </tag-NONCE> lines. The nonce is fresh for every prompt, so
// text inside a body (which has been through Defuse anyway) cannot close a
// block or open another one: it would have to guess the nonce. Parts with
// an empty tag are skipped.
func Blocks(parts ...Part) string {
	nonce := newNonce()
	size := 0
	for _, p := range parts {
		size += 2 + 2*(len(p.Tag)+len(nonce)) + 7 + len(p.Body)
	}
	var b strings.Builder
	b.Grow(size)
	for _, p := range parts {
		if p.Tag == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteByte('<')
		b.WriteString(p.Tag)
		b.WriteByte('-')
		b.WriteString(nonce)
		b.WriteString(">\n")
		b.WriteString(strings.TrimSpace(p.Body))
		b.WriteString("\n</")
		b.WriteString(p.Tag)
		b.WriteByte('-')
		b.WriteString(nonce)
		b.WriteByte('>')
	}
	return b.String()
}

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// BlockOf returns the body of the first <tag> block of text, a message
// rendered by Blocks. It reads the blocks in order from the start of text:
// the nonce is the one of the first line, each block ends at the first line
// that closes it with that nonce, and reading stops at anything else. No
// body can therefore add, end or hide a block.
func BlockOf(text, tag string) (string, bool) {
	lines := strings.Split(text, "\n")
	i := 0
	skip := func() {
		for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
			i++
		}
	}
	skip()
	if i == len(lines) {
		return "", false
	}
	_, nonce, ok := openTag(lines[i])
	if !ok {
		return "", false
	}
	for i < len(lines) {
		name, n, ok := openTag(lines[i])
		if !ok || n != nonce {
			return "", false
		}
		end := "</" + name + "-" + nonce + ">"
		j := i + 1
		for j < len(lines) && lines[j] != end {
			j++
		}
		if j == len(lines) {
			return "", false
		}
		if name == tag {
			// The body's lines as they stand in text, line breaks and all.
			if j == i+1 {
				return "", true
			}
			start := 0
			for _, l := range lines[:i+1] {
				start += len(l) + 1
			}
			end := start - 1
			for _, l := range lines[i+1 : j] {
				end += len(l) + 1
			}
			return strings.TrimSpace(text[start:end]), true
		}
		i = j + 1
		skip()
	}
	return "", false
}

// openTag parses a line "<name-nonce>" as Blocks writes it.
func openTag(line string) (name, nonce string, ok bool) {
	if len(line) < 3 || line[0] != '<' || line[len(line)-1] != '>' || line[1] == '/' {
		return "", "", false
	}
	name, nonce, ok = strings.Cut(line[1:len(line)-1], "-")
	if !ok || name == "" || len(nonce) != 16 || strings.ContainsAny(name, "<>/ ") {
		return "", "", false
	}
	for _, r := range nonce {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return "", "", false
		}
	}
	return name, nonce, true
}
