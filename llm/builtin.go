package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// BuiltinModel is the name NPCs use to ask for the offline model.
const BuiltinModel = "builtin"

// Builtin is the offline model: it needs no key and no network and answers
// deterministically (the same request always gets the same answer), so npcd
// runs end to end out of the box and scenarios are reproducible in CI.
//
//   - A tick is answered with say/emote tool calls in the persona's voice
//     whose words come from the NPC's state, never from what it just
//     heard: the memory, journal line, summary line or earlier exchange
//     that shares the most words with what was said; else what it knows
//     of the speaker; else its persona. So a check that a reply mentions
//     the sword holds only when the NPC has the sword in mind.
//   - A summarize request is answered with an extractive summary: lines of
//     the transcript, kept verbatim, sorted into the sections the prompt
//     asks for, merged with the previous summary, cut to the token limit.
//   - An extract request is answered with one fact per journal entry as JSON.
//
// It is not a language model: it does not reason, paraphrase or plan. A
// Builtin is safe for concurrent use.
type Builtin struct {
	counter *Counter
}

// NewBuiltin returns the offline model.
func NewBuiltin() *Builtin { return &Builtin{counter: NewCounter(BuiltinModel)} }

// PromptCounter is the counter the builtin model counts a prompt with for
// its usage (see PromptCounter, Request.MessageTokens).
func (b *Builtin) PromptCounter() *Counter { return b.counter }

// BorrowsMessages marks that Chat keeps nothing of req.Messages once it
// returns (see MessagesBorrower).
func (b *Builtin) BorrowsMessages() {}

// Chat answers req.
func (b *Builtin) Chat(ctx context.Context, req Request) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, &Error{Code: CodeTimeout, Err: err}
	}
	if len(req.Messages) == 0 {
		return Response{}, &Error{Code: CodeBadRequest, Err: fmt.Errorf("no messages")}
	}
	var msg Message
	switch req.Task {
	case TaskSummarize:
		msg = Message{Role: RoleAssistant, Content: b.summarize(req)}
	case TaskExtract:
		msg = Message{Role: RoleAssistant, Content: b.extract(req)}
	case TaskReflect:
		msg = Message{Role: RoleAssistant, Content: b.reflect(req)}
	default:
		msg = b.tick(req)
	}
	usage := Usage{PromptTokens: b.messageTokens(req) + b.counter.Tools(req.Tools), CompletionTokens: b.counter.Message(msg)}
	return Response{Message: msg, Usage: usage, FinishReason: "stop"}, nil
}

// messageTokens is the count of req's messages: the caller's, when it
// counted them in the builtin model's encoding, else counted here.
func (b *Builtin) messageTokens(req Request) int {
	if req.MessageTokens > 0 && req.MessageEncoding == b.counter.Encoding() {
		return req.MessageTokens
	}
	return b.counter.Messages(req.Messages)
}

func hash(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func pick(h uint64, options []string) string { return options[h%uint64(len(options))] }

// ---- ticks ----

type voice struct {
	openers []string
}

var voices = []struct {
	words []string
	v     voice
}{
	{[]string{"gruff", "grumpy", "stern", "surly", "blunt", "grizzled"}, voice{[]string{"Hmph.", "Aye.", "Hm."}}},
	{[]string{"cheerful", "friendly", "warm", "jolly", "kind", "bubbly"}, voice{[]string{"Oh!", "Well now!", "Ah, splendid!"}}},
	{[]string{"wise", "old", "elder", "sage", "mystic", "ancient"}, voice{[]string{"Ah.", "Mm, I see.", "Indeed."}}},
	{[]string{"nervous", "shy", "timid", "anxious"}, voice{[]string{"Oh— um.", "Ah, well...", "Oh dear."}}},
}

func voiceOf(persona string) voice {
	low := strings.ToLower(persona)
	for _, v := range voices {
		for _, w := range v.words {
			if strings.Contains(low, w) {
				return v.v
			}
		}
	}
	return voice{[]string{"Well.", "Ah.", "I see."}}
}

type perceived struct {
	actor, verb, text, line string
}

func parseEvent(line string) perceived {
	body, ok := matchEvent(strings.TrimSpace(line))
	if !ok {
		return perceived{line: line, text: line}
	}
	if who, quoted, ok := matchSpeech(body); ok {
		text, err := strconv.Unquote(quoted)
		if err != nil {
			text = strings.Trim(quoted, `"`)
		}
		return perceived{actor: who, verb: "say", text: text, line: line}
	}
	actor, rest, _ := strings.Cut(body, " ")
	verb := "act"
	switch {
	case strings.HasPrefix(rest, "arrives"):
		verb = "arrive"
	case strings.HasPrefix(rest, "leaves"):
		verb = "leave"
	case strings.HasPrefix(rest, "gives"):
		verb = "give"
	case strings.HasPrefix(rest, "attacks"):
		verb = "attack"
	}
	if strings.HasPrefix(body, "(") {
		actor, verb, rest = "", "narration", strings.Trim(body, "()")
	}
	return perceived{actor: actor, verb: verb, text: rest, line: line}
}

// snippet returns up to n bytes of s, cut at a word boundary.
func snippet(s string, n int) string {
	if !singleSpaced(s) {
		s = strings.Join(strings.Fields(s), " ")
	}
	if len(s) <= n {
		return s
	}
	cut := strings.LastIndex(s[:n], " ")
	if cut < n/2 {
		cut = n
	}
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// singleSpaced reports whether s is ASCII with its words already apart by
// single spaces, none before or after them: what joining its fields by a
// space gives back unchanged.
func singleSpaced(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 0x80, c == '\t', c == '\n', c == '\v', c == '\f', c == '\r':
			return false
		case c == ' ' && (i == 0 || i == len(s)-1 || s[i+1] == ' '):
			return false
		}
	}
	return true
}

func toolNames(tools []Tool) map[string]bool {
	m := map[string]bool{}
	for _, t := range tools {
		m[t.Name] = true
	}
	return m
}

func (b *Builtin) tick(req Request) Message {
	system := ""
	if req.Messages[0].Role == RoleSystem {
		system = req.Messages[0].Content
	}
	name := "I"
	if n, ok := matchName(system); ok {
		name = strings.TrimSpace(n)
	}
	v := voiceOf(firstLine(system))
	has := toolNames(req.Tools)
	last := req.Messages[len(req.Messages)-1]
	h := hash(name, last.Content)

	if last.Role == RoleTool {
		return b.afterResults(req, has, h)
	}
	if last.Role != RoleUser {
		return Message{Role: RoleAssistant}
	}
	content := last.Content
	// What it can remember: the memories recalled for this turn, what it
	// perceived earlier in the live history, its context summary.
	st := state{
		role:    roleOf(firstLine(system), name),
		present: sectionLines(content, "## Present\n"),
		content: content, earlier: req.Messages[:len(req.Messages)-1], system: system,
	}
	if _, now, ok := strings.Cut(content, "\n[NOW]\n"); ok {
		content = now
	}
	var evs []perceived
	for line := range strings.SplitSeq(content, "\n") {
		if strings.TrimSpace(line) != "" {
			evs = append(evs, parseEvent(line))
		}
	}
	if len(evs) == 0 {
		return Message{Role: RoleAssistant}
	}
	// Answer the last thing said; failing that, the last thing that happened.
	ev := evs[len(evs)-1]
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].verb == "say" {
			ev = evs[i]
			break
		}
	}
	opener := pick(h, v.openers)
	who := ev.actor
	if who == "" {
		who = "friend"
	}
	var calls []ToolCall
	call := func(tool, text string) {
		if !has[tool] {
			return
		}
		args, _ := json.Marshal(map[string]string{"text": text})
		calls = append(calls, ToolCall{ID: fmt.Sprintf("call_%x_%d", h&0xffffffff, len(calls)+1), Name: tool, Arguments: string(args)})
	}
	// A tool the perceived text names, that needs no arguments, is used
	// too ("can you look around?" → look): the game answers it.
	for _, t := range req.Tools {
		if t.Name == "say" || t.Name == "emote" || !namedIn(t.Name, ev.text) || requiresArgs(t.Parameters) {
			continue
		}
		calls = append(calls, ToolCall{ID: fmt.Sprintf("call_%x_%d", h&0xffffffff, len(calls)+1), Name: t.Name, Arguments: "{}"})
	}
	switch ev.verb {
	case "say":
		call("say", opener+" "+reaction(ev, who, st, h))
	case "arrive":
		call("emote", "looks up and nods at "+who+".")
		call("say", fmt.Sprintf("%s Welcome, %s. What brings you here?", opener, who))
	case "leave":
		call("emote", "watches "+who+" go.")
	case "give":
		call("say", fmt.Sprintf("%s For me, %s? (%s) My thanks.", opener, who, snippet(ev.text, 60)))
	case "attack":
		call("say", fmt.Sprintf("Stop that, %s! Enough!", who))
	default:
		// Only the act's first clause is echoed: the rest of a player's
		// emote is theirs, and may pose as someone else's words.
		if act := firstClause(ev.text, 48); act != "" && who != "friend" {
			call("emote", fmt.Sprintf("watches %s, who %s.", who, act))
		} else {
			call("emote", "takes note and watches closely.")
		}
	}
	if !has["say"] && !slices.ContainsFunc(calls, func(c ToolCall) bool { return c.Name == "emote" }) {
		// Without say, words are shown as an emote rather than dropped.
		call("emote", fmt.Sprintf("turns to %s and answers: %s %s", who, opener, reaction(ev, who, st, h)))
	}
	if len(calls) == 0 { // neither say nor emote offered: answer in prose
		return Message{Role: RoleAssistant, Content: opener + " " + reaction(ev, who, st, h)}
	}
	return Message{Role: RoleAssistant, ToolCalls: calls}
}

var (
	memoryAsk = regexp.MustCompile(`(?i)\b(remember|recall|forgot|forget|did i|what did|do you know|have you seen|told you)\b`)
	greeting  = regexp.MustCompile(`(?i)^(hello|hi|hey|greetings|good (morning|day|evening)|well met)\b`)
)

// state is what the NPC has in mind when it answers: the words of a reply
// come from here, never from what it just perceived.
type state struct {
	role    string   // the persona's description of the NPC ("the gruff village blacksmith of Oakvale")
	present []string // what it knows of those present (profile lines)
	// What it remembers — memories, earlier exchanges, summary lines — is
	// read from the user message's content, the earlier messages and the
	// system prompt where they are (eachRecalled).
	content, system string
	earlier         []Message
}

// reaction is the words of a reply to ev: a promise to look out for what
// someone lost; else the remembered line that shares the most words with
// what was said; else what the NPC knows of the speaker; else a line of its
// persona.
func reaction(ev perceived, who string, st state, h uint64) string {
	text := strings.TrimSpace(ev.text)
	if lostRe.MatchString(text) { // a promise, in the NPC's own words
		return fmt.Sprintf("That's bad news, %s. I'll keep an eye out for it.", who)
	}
	if best := bestRecallIn(text, st.content, st.earlier, st.system); best != "" {
		return fmt.Sprintf("%s, I remember: %s", who, snippet(best, 160))
	}
	if known := knownOf(who, st.present); known != "" {
		return fmt.Sprintf("I know you, %s: %s %s", who, snippet(known, 160), pick(h>>8, []string{"What is it now?", "Go on.", "Speak."}))
	}
	role := ""
	if st.role != "" {
		role = " I am " + st.role + "."
	}
	switch {
	case greeting.MatchString(text):
		return fmt.Sprintf("Well met, %s.%s What do you need?", who, role)
	case memoryAsk.MatchString(text) || strings.HasSuffix(text, "?"):
		return fmt.Sprintf("Nothing comes to mind about that, %s.%s %s", who, role, pick(h>>8, []string{"Ask me about my trade.", "Ask someone else, maybe.", "Tell me more."}))
	}
	return fmt.Sprintf("%s, %s.%s", pick(h>>8, []string{"I hear you", "Noted", "So you say"}), who, role)
}

// lostRe spots a loss of the speaker's.
var lostRe = regexp.MustCompile(`(?i)\b(?:lost|stole|stolen|missing|misplaced)\b[^.?!]*?\bmy [a-z]`)

// roleOf is how the NPC describes itself, from the persona line of its
// system prompt ("" when the persona does not say): "the gruff village
// blacksmith of Oakvale" from "You are Brom, the gruff village blacksmith
// of Oakvale." (matchRole).
func roleOf(personaLine, name string) string {
	if role, ok := matchRole(strings.TrimSpace(personaLine)); ok && !strings.Contains(role, "a character in a living game world") {
		return strings.TrimSpace(role)
	}
	return ""
}

// knownOf returns what a profile line of the working context says of who.
func knownOf(who string, present []string) string {
	for _, l := range present {
		name, rest, ok := strings.Cut(l, " ")
		if !ok || !strings.EqualFold(name, who) {
			continue
		}
		if _, facts, ok := strings.Cut(rest, "Known: "); ok {
			return facts
		}
		if _, desc, ok := strings.Cut(rest, ": "); ok {
			return desc
		}
	}
	return ""
}

// sectionLines returns the "- " lines under header in a working context,
// without their dash.
func sectionLines(content, header string) []string {
	_, after, ok := strings.Cut(content, header)
	if !ok {
		return nil
	}
	var out []string
	for l := range strings.SplitSeq(after, "\n") {
		if !strings.HasPrefix(l, "- ") {
			break
		}
		out = append(out, strings.TrimPrefix(l, "- "))
	}
	return out
}

// eachRecalled calls f with what the NPC can remember for a user message
// of content, in order: the memories recalled for it (its working
// context), the event lines of the earlier user messages, newest first, and
// the lines of its context summary.
func eachRecalled(content string, earlier []Message, system string, f func(string)) {
	if _, after, ok := strings.Cut(content, "## Recalled\n"); ok {
		for l := range strings.SplitSeq(after, "\n") {
			if !strings.HasPrefix(l, "- ") {
				break
			}
			f(strings.TrimPrefix(l, "- "))
		}
	}
	eachEarlierLine(earlier, f)
	eachSummaryLine(system, f)
}

// eachSummaryLine calls f with each line of the [CONTEXT SUMMARY] appended
// to a system prompt.
func eachSummaryLine(system string, f func(string)) {
	// The summary starts a line of its own; the instructions above it
	// mention it mid-sentence.
	i := strings.LastIndex(system, "\n[CONTEXT SUMMARY]")
	if i < 0 {
		return
	}
	summary := system[i:]
	for l := range strings.SplitSeq(summary, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "- ") {
			f(strings.TrimPrefix(l, "- "))
		}
	}
}

// eachEarlierLine calls f with the event lines of earlier user messages,
// newest first, without their working context: those of the newest
// messages until 200 lines are given, the message that reaches them whole.
func eachEarlierLine(ms []Message, f func(string)) {
	n := 0
	for i := len(ms) - 1; i >= 0 && n < 200; i-- {
		if ms[i].Role != RoleUser {
			continue
		}
		content := ms[i].Content
		if _, now, ok := strings.Cut(content, "\n[NOW]\n"); ok {
			content = now
		}
		for l := range strings.SplitSeq(content, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				f(l)
				n++
			}
		}
	}
}

// bestRecall returns the recalled line sharing the most words with text
// (the first of those sharing as many), skipping the NPC's own words.
func bestRecall(text string, recalled []string) string {
	var sc recallScorer
	if !sc.init(text) {
		return ""
	}
	for _, r := range recalled {
		sc.consider(r)
	}
	return sc.best
}

// bestRecallIn is bestRecall of the lines the NPC remembers for a user
// message of content (eachRecalled), read where they are.
func bestRecallIn(text, content string, earlier []Message, system string) string {
	var sc recallScorer
	if !sc.init(text) {
		return ""
	}
	eachRecalled(content, earlier, system, sc.consider)
	return sc.best
}

// recallScorer finds bestRecall's line among the lines it considers.
type recallScorer struct {
	ws     wordScanner
	words  []string // text's content words, lower-cased, each once
	shared []bool
	best   string
	bestN  int
}

// init takes the text to answer; false when it has no content word.
func (sc *recallScorer) init(text string) bool {
	var bounds [][2]int // of text's content words in ws.buf, each once
	sc.ws.words(text, func(i, j int) {
		for _, b := range bounds {
			if string(sc.ws.buf[b[0]:b[1]]) == string(sc.ws.buf[i:j]) {
				return
			}
		}
		bounds = append(bounds, [2]int{i, j})
	})
	if len(bounds) == 0 {
		return false
	}
	lower := string(sc.ws.buf) // text lower-cased, of which words are parts
	sc.words = make([]string, len(bounds))
	for k, b := range bounds {
		sc.words[k] = lower[b[0]:b[1]]
	}
	sc.shared = make([]bool, len(sc.words))
	return true
}

// consider takes the recalled line r, the best so far if it shares more
// words with the text than the best before it.
func (sc *recallScorer) consider(r string) {
	if ownWords(r) {
		// Quoting its own earlier replies would nest quotes of quotes
		// into every new line the NPC says and journals.
		return
	}
	clear(sc.shared)
	n := 0
	sc.ws.words(r, func(i, j int) {
		w := sc.ws.buf[i:j]
		for k, x := range sc.words {
			if !sc.shared[k] && x == string(w) {
				sc.shared[k] = true
				n++
				return
			}
		}
	})
	if n > sc.bestN {
		sc.best, sc.bestN = r, n
	}
}

var smallWords = map[string]bool{"the": true, "a": true, "an": true, "you": true, "i": true, "me": true, "my": true,
	"do": true, "did": true, "what": true, "remember": true, "is": true, "was": true, "to": true, "of": true, "and": true,
	"it": true, "that": true, "in": true, "at": true, "on": true, "your": true, "about": true, "recall": true, "know": true}

func contentWords(s string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') }) {
		if len(w) > 2 && !smallWords[w] {
			m[w] = true
		}
	}
	return m
}

// afterResults continues a turn whose tool calls were answered: it reacts
// once to a real observation from the game, then ends the turn.
func (b *Builtin) afterResults(req Request, has map[string]bool, h uint64) Message {
	msgs := req.Messages
	steps := 0
	var observations []string
	i := len(msgs) - 1
	for ; i >= 0 && msgs[i].Role == RoleTool; i-- {
		c := strings.TrimSpace(msgs[i].Content)
		if c != "ok" && !strings.HasPrefix(c, "error") && !strings.HasPrefix(c, "(no result") {
			observations = append(observations, c)
		}
	}
	for j := i; j >= 0 && msgs[j].Role != RoleUser; j-- {
		if msgs[j].Role == RoleAssistant {
			steps++
		}
	}
	if steps >= 2 || len(observations) == 0 || !has["say"] {
		return Message{Role: RoleAssistant}
	}
	sort.Strings(observations)
	args, _ := json.Marshal(map[string]string{"text": "So: " + snippet(observations[0], 120)})
	return Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: fmt.Sprintf("call_%x_r", h&0xffffffff), Name: "say", Arguments: string(args)}}}
}

// namedIn reports whether tool name appears as a word in text (underscores
// read as spaces).
func namedIn(name, text string) bool {
	n := strings.ToLower(strings.ReplaceAll(name, "_", " "))
	t := " " + strings.ToLower(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return ' '
	}, text)) + " "
	return strings.Contains(t, " "+n+" ")
}

func requiresArgs(schema json.RawMessage) bool {
	var s struct {
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(schema, &s)
	return len(s.Required) > 0
}

// firstClause returns text up to its first sentence end or bracket, if
// that is at most n bytes, else "".
func firstClause(text string, n int) string {
	text = strings.TrimSpace(text)
	if i := strings.IndexAny(text, ".!?[(\"“:;"); i >= 0 {
		text = text[:i]
	}
	text = strings.TrimSpace(text)
	if len(text) > n {
		return ""
	}
	return text
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
