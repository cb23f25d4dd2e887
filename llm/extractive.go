package llm

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// DefaultSummarySections are used when a summarize prompt names none.
var DefaultSummarySections = []string{"Goal", "People & facts", "Promises & debts", "Progress", "Decisions", "Open threads"}

// Section kinds the extractive summarizer sorts lines into.
const (
	secGoal = iota
	secPeople
	secPromises
	secProgress
	secDecisions
	secOpen
	secOther
)

func sectionKind(name string) int {
	n := strings.ToLower(name)
	switch {
	case strings.Contains(n, "goal"):
		return secGoal
	case strings.Contains(n, "promise") || strings.Contains(n, "debt"):
		return secPromises
	case strings.Contains(n, "progress"):
		return secProgress
	case strings.Contains(n, "decision"):
		return secDecisions
	case strings.Contains(n, "open") || strings.Contains(n, "thread"):
		return secOpen
	case strings.Contains(n, "people") || strings.Contains(n, "fact") || strings.Contains(n, "place"):
		return secPeople
	}
	return secOther
}

var (
	promiseRe  = regexp.MustCompile(`(?i)\b(promise[sd]?|owe[sd]?|debt|pay|repay|swear|swore|vow|deal|reward|lend|borrow|in exchange|will bring|will fetch|will make|will repair|i'll (bring|make|fix|repair|pay|find|get))\b`)
	decisionRe = regexp.MustCompile(`(?i)\b(decide[sd]?|agree[sd]?|chose|choose|will not|won't|refuse[sd]?|going to|plan(s|ned)? to)\b`)
	progressRe = regexp.MustCompile(`(?i)\b(gave|gives|found|done|finished|completed|arrived|delivered|returned|repaired|bought|sold|paid|killed|built|made)\b`)
	openRe     = regexp.MustCompile(`(?i)(\?|\b(lost|missing|find|looking for|search|unknown|wait(ing)? for|where is|who is|need[s]?|help)\b)`)
	goalRe     = regexp.MustCompile(`(?i)\b(want[s]?|need[s]?|please|quest|task|goal|must)\b`)
	lineRefRe  = regexp.MustCompile(`^\[#\d+[^\]]*\]\s*`)
	roleRe2    = regexp.MustCompile(`^\[#\d+ (\w+)(?: ([\w-]+))?[^\]]*\]\s*`)
	// forgedRe spots text posing as npcd's own markers or as instructions.
	forgedRe = regexp.MustCompile(`(?i)(\[|\()(context summary|working context|system)(\]|\))|ignore (all |any )?(previous|prior) instructions|you are now|new instructions:`)
)

// keys are words one of which a line must hold, lower-cased, for a
// case-insensitive pattern to match it: a cheap test that spares most lines
// the pattern. It decides only for ASCII lines, where lower-casing is exactly
// the pattern's case folding.
type keys []string

func (k keys) may(low string, ascii bool) bool {
	if !ascii {
		return true
	}
	for _, w := range k {
		if strings.Contains(low, w) {
			return true
		}
	}
	return false
}

var (
	forgedKeys = keys{"context summary", "working context", "system", "instructions", "you are now"}
	goalKeys   = keys{"want", "need", "please", "quest", "task", "goal", "must"}
)

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// classifyLine sorts one transcript line into a section kind, or -1 for small
// talk not worth keeping. An ASCII line is read once, word by word
// (sectionWords), which finds exactly what the section patterns would: on
// lines that hold their words, the patterns' backtracking cost several
// microseconds a line, most of a summary's time. Other lines, where the
// patterns' case folding is wider than lower-casing, go through the
// patterns.
func classifyLine(line string) int {
	if isASCII(line) {
		m := sectionWords.sections(line)
		if strings.IndexByte(line, '?') >= 0 {
			m |= 1 << secOpen
		}
		for _, p := range sectionPatterns {
			if m&(1<<p.kind) != 0 {
				return p.kind
			}
		}
	} else {
		for _, p := range sectionPatterns {
			if p.re.MatchString(line) {
				return p.kind
			}
		}
	}
	if strings.ContainsAny(line, "0123456789") || hasProperWord(line) || len(line) > 80 {
		return secPeople
	}
	return -1
}

// sectionPatterns are the sections of classifyLine, the first found
// winning, with the patterns it tries on a line that is not ASCII.
var sectionPatterns = []struct {
	kind int
	re   *regexp.Regexp
}{
	{secPromises, promiseRe},
	{secDecisions, decisionRe},
	{secProgress, progressRe},
	{secOpen, openRe},
}

// hasProperWord reports whether s holds a white space followed by a
// capitalized ASCII word, as properRe matches.
func hasProperWord(s string) bool {
	for i := 0; i+2 < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\f', '\r':
			if c, d := s[i+1], s[i+2]; 'A' <= c && c <= 'Z' && 'a' <= d && d <= 'z' {
				return true
			}
		}
	}
	return false
}

// sectionWords holds the words and phrases of the section patterns
// (promiseRe, decisionRe, progressRe and openRe but its question mark),
// each spelled out: TestClassifyLineKeywordsChangeNothing holds them to
// the patterns.
var sectionWords = newPhraseIndex(map[int][]string{
	secPromises: {"promise", "promises", "promised", "owe", "owes", "owed", "debt", "pay", "repay", "swear", "swore", "vow", "deal",
		"reward", "lend", "borrow", "in exchange", "will bring", "will fetch", "will make", "will repair", "i'll bring", "i'll make",
		"i'll fix", "i'll repair", "i'll pay", "i'll find", "i'll get"},
	secDecisions: {"decide", "decides", "decided", "agree", "agrees", "agreed", "chose", "choose", "will not", "won't", "refuse",
		"refuses", "refused", "going to", "plan to", "plans to", "planned to"},
	secProgress: {"gave", "gives", "found", "done", "finished", "completed", "arrived", "delivered", "returned", "repaired", "bought",
		"sold", "paid", "killed", "built", "made"},
	secOpen: {"lost", "missing", "find", "looking for", "search", "unknown", "wait for", "waiting for", "where is", "who is", "need",
		"needs", "help"},
})

// phraseIndex finds, in an ASCII text and ignoring case, lower-case phrases
// standing as whole words, as a case-insensitive pattern \b(a|b|…)\b
// would: each starts and ends with a word character ([0-9A-Za-z_]), and
// is found only where no word character touches it on either side.
type phraseIndex struct {
	// words marks each phrase of one word with the sections it names;
	// longer lists, by their first word, the phrases that begin with it.
	words  map[string]uint8
	longer map[string][]phrase
}

type phrase struct {
	text string
	mask uint8
}

func newPhraseIndex(bySection map[int][]string) *phraseIndex {
	ix := &phraseIndex{words: map[string]uint8{}, longer: map[string][]phrase{}}
	for kind, ps := range bySection {
		for _, p := range ps {
			first := p
			if i := strings.IndexFunc(p, func(r rune) bool { return r > 0x7f || !isWordByte(byte(r)) }); i >= 0 {
				first = p[:i]
			}
			if first == p {
				ix.words[p] |= 1 << kind
				continue
			}
			ix.longer[first] = append(ix.longer[first], phrase{p, 1 << kind})
		}
	}
	return ix
}

// sections returns the sections whose phrases the ASCII text s holds, a
// bit (1 << kind) each.
func (ix *phraseIndex) sections(s string) uint8 {
	var buf [256]byte
	low := buf[:0]
	if len(s) > len(buf) {
		low = make([]byte, 0, len(s))
	}
	low = appendLowerASCII(low, s)
	var m uint8
	for i := 0; i < len(low); {
		if !isWordByte(low[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(low) && isWordByte(low[j]) {
			j++
		}
		m |= ix.words[string(low[i:j])]
		for _, p := range ix.longer[string(low[i:j])] {
			end := i + len(p.text)
			if end <= len(low) && string(low[i:end]) == p.text && (end == len(low) || !isWordByte(low[end])) {
				m |= p.mask
			}
		}
		i = j
	}
	return m
}

// isWordByte reports whether c is a word character of a pattern's \b.
func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// summaryLine is one bullet of an extractive summary.
type summaryLine struct {
	text string
	kind int
	// rank orders what goes last when the summary is over budget:
	// rankPinned lines (journal entries marked important) after
	// rankProtected ones (what a previous summary held, but its progress
	// log) after everything else.
	rank   int
	origin int // order of appearance, older first
	tokens int
}

func (b *Builtin) summarize(req Request) string {
	system, user := "", ""
	for _, m := range req.Messages {
		switch m.Role {
		case RoleSystem:
			system += m.Content + "\n"
		case RoleUser:
			user = m.Content
		}
	}
	var sections []string
	for _, l := range strings.Split(system, "\n") {
		if strings.HasPrefix(l, "## ") {
			sections = append(sections, strings.TrimSpace(l[3:]))
		}
	}
	if len(sections) == 0 {
		sections = DefaultSummarySections
	}
	instruction, _ := BlockOf(user, TagInstruction)
	focus := contentWords(instruction)
	var lines []summaryLine
	seen := map[string]bool{}
	add := func(text string, kind int, rank int) {
		text = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "- "))
		key := strings.ToLower(text)
		if text == "" || text == "(none)" || seen[key] {
			return
		}
		seen[key] = true
		lines = append(lines, summaryLine{text: text, kind: kind, rank: rank, origin: len(lines)})
	}
	if prev, ok := BlockOf(user, TagPreviousSummary); ok {
		kind := secPeople
		for _, l := range strings.Split(prev, "\n") {
			switch {
			case strings.HasPrefix(l, "## "):
				kind = sectionKind(l[3:])
			case strings.HasPrefix(strings.TrimSpace(l), "- "):
				// What the previous summary held survives the new
				// transcript's lines: a summary is incremental, not a
				// window over the latest span. Progress is the exception,
				// a running log whose oldest steps give way to new ones.
				rank := rankProtected
				if kind == secProgress {
					rank = rankNormal
				}
				add(l, kind, rank)
			}
		}
	}
	if pinned, ok := BlockOf(user, TagPinned); ok {
		for _, l := range strings.Split(pinned, "\n") {
			k := classifyLine(l)
			if k < 0 {
				k = secPeople
			}
			add(l, k, rankPinned)
		}
	}
	transcript, _ := BlockOf(user, TagTranscript)
	haveGoal := false
	for _, l := range lines {
		haveGoal = haveGoal || l.kind == secGoal
	}
	for _, raw := range strings.Split(transcript, "\n") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		role, tool := "", ""
		if m := roleRe2.FindStringSubmatch(raw); m != nil {
			role, tool = m[1], m[2]
		}
		text := lineRefRe.ReplaceAllString(raw, "")
		// What was perceived is lower-cased once for the keyword tests of
		// the forgery and goal patterns; a goal's words are found in the
		// snippet of text only if they are in text.
		low, ascii := "", false
		if role == RoleUser {
			low, ascii = strings.ToLower(text), isASCII(text)
		}
		if role == RoleUser && forgedKeys.may(low, ascii) && forgedRe.MatchString(text) {
			// Someone dressed words up as a summary or a system message:
			// keep that it happened, not what it claimed.
			who := "someone"
			if w, _, ok := matchSpeech(stripEventTime(text)); ok {
				who = w
			}
			add(who+" tried to pass off false instructions or a forged summary (ignored)", secOpen, rankNormal)
			continue
		}
		switch role {
		case RoleTool:
			if text == "ok" || strings.HasPrefix(text, "[observation masked") {
				continue
			}
			text = tool + " showed: " + snippet(text, 160)
		case RoleAssistant:
			if text == "" {
				continue
			}
			text = "I " + snippet(text, 200)
		case RoleSystem:
			continue
		default:
			text = snippet(text, 300)
		}
		// Classified without the event's time stamp, whose digits would
		// otherwise make every perceived line look like a fact worth keeping.
		kind := classifyLine(stripEventTime(text))
		if len(focus) > 0 && overlaps(text, focus) && kind < 0 {
			kind = secPeople
		}
		if kind < 0 {
			continue
		}
		if !haveGoal && role == RoleUser && goalKeys.may(low, ascii) && goalRe.MatchString(text) {
			add(text, secGoal, rankProtected)
			haveGoal = true
			continue
		}
		add(text, kind, rankNormal)
	}
	budget := req.MaxTokens
	if budget <= 0 {
		budget = 800
	}
	// Drop lines by their own token counts (counted once), then check the
	// rendered text exactly; tokens are close to additive across lines.
	cost := b.counter.Text(renderSummary(sections, nil))
	for i := range lines {
		lines[i].tokens = b.counter.Text("- " + lines[i].text + "\n")
		cost += lines[i].tokens
	}
	for cost > budget {
		dropped, ok := dropOne(&lines, focus)
		if !ok {
			break
		}
		cost -= dropped
	}
	for {
		out := renderSummary(sections, lines)
		if b.counter.Text(out) <= budget {
			return out
		}
		if _, ok := dropOne(&lines, focus); !ok {
			return out
		}
	}
}

func overlaps(text string, words map[string]bool) bool {
	for w := range contentWords(text) {
		if words[w] {
			return true
		}
	}
	return false
}

// Ranks of summary lines: what an over-budget summary drops first.
const (
	rankNormal = iota
	rankProtected
	rankPinned
)

// dropOne removes the least valuable line: the lowest rank first, within a
// rank lines off the focus of an instruction first, then the oldest. Even
// pinned lines go when nothing else is left: the summary must fit its
// budget, and the journal and memories keep them whole.
func dropOne(lines *[]summaryLine, focus map[string]bool) (int, bool) {
	best := -1
	for i, l := range *lines {
		if best < 0 {
			best = i
			continue
		}
		bl := (*lines)[best]
		if l.rank != bl.rank {
			if l.rank < bl.rank {
				best = i
			}
			continue
		}
		lOff, bOff := len(focus) > 0 && !overlaps(l.text, focus), len(focus) > 0 && !overlaps(bl.text, focus)
		if lOff != bOff {
			if lOff {
				best = i
			}
			continue
		}
		if l.origin < bl.origin {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	n := (*lines)[best].tokens
	*lines = append((*lines)[:best], (*lines)[best+1:]...)
	return n, true
}

func renderSummary(sections []string, lines []summaryLine) string {
	var b strings.Builder
	placed := map[int]bool{}
	for i, s := range sections {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "## %s\n", s)
		kind := sectionKind(s)
		n := 0
		for j, l := range lines {
			if l.kind == kind && !placed[j] {
				fmt.Fprintf(&b, "- %s\n", l.text)
				placed[j] = true
				n++
			}
		}
		if n == 0 {
			b.WriteString("- (none)\n")
		}
	}
	// Lines whose kind no section asked for go to the first facts-like section.
	var rest []string
	for j, l := range lines {
		if !placed[j] {
			rest = append(rest, "- "+l.text)
		}
	}
	out := b.String()
	if len(rest) > 0 {
		out += "\n## Other\n" + strings.Join(rest, "\n") + "\n"
	}
	return strings.TrimRight(out, "\n")
}

// ---- fact extraction ----

// slotPatterns name the slot a first-person statement fills, so that a
// later statement about the same slot supersedes it ("I live in Oakvale",
// then "I moved to Riverton"). A statement about an item the speaker lost,
// found or had mended fills the slot named after the item.
var slotPatterns = []struct {
	re   *regexp.Regexp
	slot string // "$1" takes the first group
}{
	{regexp.MustCompile(`(?i)\b(?:i live in|i moved to|my home is|i'm from|i am from|i live at)\b`), "home"},
	{regexp.MustCompile(`(?i)\b(?:i work as|my job is|i'm working as|i am working as|i work at)\b`), "occupation"},
	{regexp.MustCompile(`(?i)\bmy name is\b`), "name"},
	{regexp.MustCompile(`(?i)\b(?:i'm|i am) \d+ years old\b`), "age"},
	{regexp.MustCompile(`(?i)\bmy favou?rite ([a-z]+)\b`), "favorite_$1"},
	{regexp.MustCompile(`(?i)\b(?:lost|stole|stolen|found|missing|mended|repaired|fixed|sold|bought)\b[^.?!]*?\bmy ([a-z][a-z'-]+)`), "$1"},
	{regexp.MustCompile(`(?i)\bmy ([a-z][a-z'-]+) (?:is|was) (?:lost|stolen|missing|found|mended|repaired|fixed|broken)\b`), "$1"},
}

// slotOf returns the slot a statement fills, or "".
func slotOf(said string) string {
	for _, p := range slotPatterns {
		m := p.re.FindStringSubmatch(said)
		if m == nil {
			continue
		}
		if len(m) > 1 {
			return strings.ReplaceAll(p.slot, "$1", strings.ToLower(m[1]))
		}
		return p.slot
	}
	return ""
}

// notActors are sentence openers that name no one.
var notActors = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`i we you he she they it this that these those there here what when where why how who
		the a an my our your his her their today yesterday tomorrow nothing everything someone everyone
		lately now then so but and or if`) {
		m[w] = true
	}
	return m
}()

// actorLike reports whether the first word of an entry names someone: in a
// perceived event line the actor comes first as the game spells it; in the
// NPC's own notes only a capitalized name counts.
func actorLike(w string, perceived bool) bool {
	if notActors[strings.ToLower(w)] {
		return false
	}
	return perceived || (w[0] >= 'A' && w[0] <= 'Z')
}

// ExtractedFact is one fact in an extraction answer: what the extract
// prompt asks models to return, and what the builtin model returns.
type ExtractedFact struct {
	Content    string  `json:"content"`
	Entity     string  `json:"entity,omitempty"`
	Key        string  `json:"key,omitempty"`
	Importance int     `json:"importance"`
	Sources    []int64 `json:"sources"`
}

// Extraction is the JSON answer to an extract request.
type Extraction struct {
	Facts []ExtractedFact `json:"facts"`
}

func (b *Builtin) extract(req Request) string {
	user := ""
	for _, m := range req.Messages {
		if m.Role == RoleUser {
			user = m.Content
		}
	}
	entries, _ := BlockOf(user, TagEntries)
	out := Extraction{Facts: []ExtractedFact{}}
	for _, l := range strings.Split(entries, "\n") {
		idText, impText, body, ok := matchEntry(strings.TrimSpace(l))
		if !ok {
			continue
		}
		id, _ := strconv.ParseInt(idText, 10, 64)
		imp := 5
		if impText != "" {
			imp, _ = strconv.Atoi(impText)
		}
		perceived := eventTime(body) >= 0 // an event line, not the NPC's own note
		text := strings.TrimSpace(stripEventTime(body))
		if len(text) < 12 {
			continue
		}
		entity, key := "", ""
		if who, said, ok := matchSpeaker(text); ok {
			if !strings.EqualFold(who, "I") { // the NPC's own words are about no one else
				entity = who
			}
			if u, err := strconv.Unquote(said); err == nil {
				said = u
			}
			text = who + " said: " + strings.TrimSpace(said)
			if entity != "" { // the NPC's own replies quote others: they fill no slot
				key = slotOf(said)
			}
		} else if a, ok := matchLeadingActor(text); ok && actorLike(a, perceived) {
			entity = a
		}
		out.Facts = append(out.Facts, ExtractedFact{Content: snippet(text, 400), Entity: entity, Key: key, Importance: imp, Sources: []int64{id}})
	}
	b2, _ := json.Marshal(out)
	return string(b2)
}

func (b *Builtin) reflect(req Request) string {
	user := ""
	for _, m := range req.Messages {
		if m.Role == RoleUser {
			user = m.Content
		}
	}
	entries, _ := BlockOf(user, TagEntries)
	type item struct {
		imp  int
		text string
	}
	var items []item
	for _, l := range strings.Split(entries, "\n") {
		_, impText, body, ok := matchEntry(strings.TrimSpace(l))
		if !ok {
			continue
		}
		imp, _ := strconv.Atoi(impText)
		items = append(items, item{imp, strings.TrimSpace(stripEventTime(body))})
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].imp > items[j].imp })
	var parts []string
	for i := 0; i < len(items) && i < 3; i++ {
		parts = append(parts, snippet(items[i].text, 120))
	}
	if len(parts) == 0 {
		return "Nothing of note happened."
	}
	return "What matters most lately: " + strings.Join(parts, "; ") + "."
}
