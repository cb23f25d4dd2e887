package llm

import (
	"hash/maphash"
	"strings"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/tiktoken-go/tokenizer"

	"github.com/npcd/npcd/internal/gencache"
)

// Per-message framing costs, as in OpenAI's published counting recipe.
const (
	tokensPerMessage  = 3 // <|start|>role ... <|end|>
	tokensPerName     = 1
	tokensPerToolCall = 3 // call framing beyond name and arguments
	tokensPerTool     = 8 // function definition framing
	tokensToolsHeader = 12
	// ReplyPriming is the fixed cost of priming the assistant's reply, counted
	// once per request.
	ReplyPriming = 3
)

// The codecs hold only immutable tables once built, so one instance of each is
// shared by every counter (the library documents them as safe for concurrent use).
var (
	cl100k = sync.OnceValue(func() tokenizer.Codec { c, _ := tokenizer.Get(tokenizer.Cl100kBase); return c })
	o200k  = sync.OnceValue(func() tokenizer.Codec { c, _ := tokenizer.Get(tokenizer.O200kBase); return c })
)

// Counter counts tokens the way a model's tokenizer would. The zero value is
// not usable; build one with NewCounter. A Counter is safe for concurrent use.
//
// It remembers the counts of the texts it saw, line by line: a prompt
// repeats most of the previous one (the persona, the summary, the history,
// recalled memories), and looking a line up costs far less than tokenizing
// it.
type Counter struct {
	codec tokenizer.Codec
	// split, when set, returns the length of the first piece of a valid
	// UTF-8 text as the encoding splits it (cl100kPiece): a text not in
	// the cache is then counted piece by piece, each piece's count cached,
	// without the tokenizer's regular expression.
	split func(string) int
	mu    sync.RWMutex
	// texts holds the counts of the texts counted, by their hash
	// (textHash), in two generations of textEntries: a text found only in
	// the older one is put in the newer again, so the texts every prompt
	// repeats stay however many others pass through.
	texts gencache.Cache[uint64, int32]
	// pieces holds the token counts of pieces, at most pieceEntries of
	// them in pieceBytes in all, and starts afresh when full.
	pieces     map[string]int
	pieceBytes int
}

// textEntries is how many texts a generation of the cache holds. Keyed by
// a hash, an entry costs some 36 bytes of map whatever the text's length,
// so the two generations hold the lines of a large world's prompts (a
// thousand NPCs of a hundred messages each) in about 9 MiB. Short texts
// are cached too: roles, names, call ids and arguments recur in every
// prompt, and tokenizing even a short one allocates several matches.
const textEntries = 1 << 17

// pieceEntries bounds the piece cache.
const pieceEntries = 32768

// textSeed seeds textHash, one per process.
var textSeed = maphash.MakeSeed()

// textHash keys a text in the cache. Two texts whose 64-bit hashes are
// equal would share a count: among the quarter million texts the cache
// holds at most, that happens with a chance of about one in five hundred
// million, and would only make a count an estimate.
func textHash(s string) uint64 { return maphash.String(textSeed, s) }

// NewCounter returns the counter for model: o200k_base for the gpt-4o,
// gpt-4.1, gpt-5 and o-series families, cl100k_base for everything else
// (older OpenAI models, open models behind OpenAI-compatible servers and the
// builtin model, where it is a close, stable estimate).
//
// Counters are shared by encoding across the process, so a text counted by
// one part of npcd (the tick's budget, the builtin model's usage, the
// compactor) is not tokenized again by another.
func NewCounter(model string) *Counter {
	codec := codecFor(model)
	if c, ok := sharedCounters.Load(codec.GetName()); ok {
		return c.(*Counter)
	}
	c, _ := sharedCounters.LoadOrStore(codec.GetName(), newCounter(codec))
	return c.(*Counter)
}

// newCounter returns a new counter of codec.
func newCounter(codec tokenizer.Codec) *Counter {
	c := &Counter{codec: codec, texts: gencache.New[uint64, int32](textEntries), pieces: map[string]int{}}
	if codec.GetName() == "cl100k_base" {
		c.split = cl100kPiece
	}
	return c
}

// sharedCounters holds one *Counter per encoding name.
var sharedCounters sync.Map

// Encoding returns the name of the encoding in use.
func (c *Counter) Encoding() string { return c.codec.GetName() }

func codecFor(model string) tokenizer.Codec {
	m := strings.ToLower(model)
	if i := strings.LastIndex(m, "/"); i >= 0 { // "openai/gpt-4o" style names
		m = m[i+1:]
	}
	for _, p := range []string{"gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4"} {
		if strings.HasPrefix(m, p) {
			return o200k()
		}
	}
	return cl100k()
}

// Text returns the number of tokens in s.
//
// A long text is counted line by line, each line's count cached, and the
// counts added up. That is exact: the tokenizers split their input into
// pieces before encoding each piece alone, and the end of a run of line
// breaks followed by a letter, a digit or an opening bracket always ends a
// piece (see lineEnd).
func (c *Counter) Text(s string) int {
	n := 0
	for s != "" {
		i := lineEnd(s)
		n += c.count(s[:i])
		s = s[i:]
	}
	return n
}

// lineEnd returns the length of s's first line: up to and including its
// first run of line breaks when a letter, a digit or one of "[-(*#" comes
// next (where every encoding in use starts a new piece), else all of s.
func lineEnd(s string) int {
	for from := 0; ; {
		i := strings.IndexByte(s[from:], '\n')
		if i < 0 {
			return len(s)
		}
		j := from + i + 1
		for j < len(s) && (s[j] == '\n' || s[j] == '\r') {
			j++
		}
		if j == len(s) {
			return j
		}
		if b := s[j]; 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' || strings.IndexByte("[-(*#", b) >= 0 {
			return j
		}
		from = j
	}
}

// count tokenizes s, or finds its count in the cache.
func (c *Counter) count(s string) int {
	if s == "" {
		return 0
	}
	h := textHash(s)
	c.mu.RLock()
	k, fresh, ok := c.texts.Get(h)
	n := int(k)
	if !ok {
		n, ok = c.withBreaks(s)
		fresh = true
	}
	c.mu.RUnlock()
	if ok && fresh {
		return n
	}
	if !ok {
		n = c.tokenize(s)
	}
	c.mu.Lock()
	c.texts.Put(h, int32(min(n, 1<<31-1)))
	c.mu.Unlock()
	return n
}

// withBreaks counts s, a line and the line breaks after it, from the
// cached count of the line alone, when the cache holds it and the breaks'
// piece: a prompt holds "line\n" where its caller counted "line". The
// breaks form a piece of their own after an ASCII letter or digit, and
// extend the last piece, a run of ASCII punctuation (and the space before
// it), after one; any other end (white space, other characters) is left to
// tokenize. Only cl100k_base's split is known to end so. The caller holds
// c.mu, at least for reading.
func (c *Counter) withBreaks(s string) (int, bool) {
	if c.split == nil {
		return 0, false
	}
	line := strings.TrimRight(s, "\r\n")
	if line == "" || len(line) == len(s) {
		return 0, false
	}
	lineN, _, ok := c.texts.Get(textHash(line))
	n := int(lineN)
	if !ok || !utf8.ValidString(line) || strings.IndexByte(line, 0x7f) >= 0 {
		// The tokenizer counted that line whole, by its own split.
		return 0, false
	}
	breaks := s[len(line):]
	if alnumASCII(line[len(line)-1]) {
		k, ok := c.pieces[breaks]
		return n + k, ok
	}
	j := len(line)
	for j > 0 && punctASCII(line[j-1]) {
		j--
	}
	if j == len(line) {
		return 0, false
	}
	if j > 0 {
		switch b := line[j-1]; {
		case b == ' ':
			j-- // " ?" opens the piece
		case alnumASCII(b) || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f':
		default:
			return 0, false // the run may go on before it
		}
	}
	last := line[j:]
	var buf [64]byte
	if len(last)+len(breaks) > len(buf) {
		return 0, false
	}
	k, ok := c.pieces[last]
	if !ok {
		return 0, false
	}
	ext, ok := c.pieces[string(append(append(buf[:0], last...), breaks...))]
	return n - k + ext, ok
}

func alnumASCII(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}

// punctASCII reports whether b is printable ASCII that is no space, letter
// or digit.
func punctASCII(b byte) bool { return '!' <= b && b <= '~' && !alnumASCII(b) }

// tokenize counts the tokens of s: piece by piece, each piece's count
// cached, when the encoding has a split of its own and s is valid UTF-8
// without DEL; else with the tokenizer.
func (c *Counter) tokenize(s string) int {
	if c.split == nil || !utf8.ValidString(s) || strings.IndexByte(s, 0x7f) >= 0 {
		return c.codecCount(s)
	}
	n := 0
	// Ticks of many NPCs count at once: pieces are looked up under the
	// read lock, and only a piece never seen takes the write lock.
	c.mu.RLock()
	for s != "" {
		i := c.split(s)
		p := s[:i]
		s = s[i:]
		k, ok := c.pieces[p]
		if !ok {
			c.mu.RUnlock()
			// A piece alone splits into itself, so the tokenizer counts
			// it as it would within the text.
			k = c.codecCount(p)
			c.mu.Lock()
			if len(c.pieces) >= pieceEntries || c.pieceBytes+len(p) > pieceBytes {
				clear(c.pieces)
				c.pieceBytes = 0
			}
			if len(p) <= maxPieceBytes {
				c.pieces[strings.Clone(p)] = k
				c.pieceBytes += len(p)
			}
			c.mu.Unlock()
			c.mu.RLock()
		}
		n += k
	}
	c.mu.RUnlock()
	return n
}

// The piece cache holds pieces of at most maxPieceBytes, pieceBytes in all.
const (
	pieceBytes    = 1 << 20
	maxPieceBytes = 256
)

// codecCount counts the tokens of s with the tokenizer.
func (c *Counter) codecCount(s string) int {
	n, err := c.codec.Count(s)
	if err != nil { // only possible in strict UTF-8 mode, which is not used
		n = len(s)/4 + 1
	}
	return n
}

// Message returns the tokens one message costs in a prompt, framing included.
func (c *Counter) Message(m Message) int {
	n := tokensPerMessage + c.Text(m.Role) + c.Text(m.Content)
	if m.Name != "" {
		n += tokensPerName + c.Text(m.Name)
	}
	for _, tc := range m.ToolCalls {
		n += tokensPerToolCall + c.Text(tc.Name) + c.Text(tc.Arguments)
	}
	if m.ToolCallID != "" {
		n += c.Text(m.ToolCallID)
	}
	return n
}

// Messages returns the tokens of a whole prompt: every message plus reply priming.
func (c *Counter) Messages(ms []Message) int {
	n := ReplyPriming
	for _, m := range ms {
		n += c.Message(m)
	}
	return n
}

// Tools returns the tokens the tool definitions add to a prompt.
func (c *Counter) Tools(tools []Tool) int {
	if len(tools) == 0 {
		return 0
	}
	n := tokensToolsHeader
	for _, t := range tools {
		// The schema is read in place, not copied: the counter keeps
		// copies of what it caches, never the text it is given.
		n += tokensPerTool + c.Text(t.Name) + c.Text(t.Description) + c.Text(unsafe.String(unsafe.SliceData(t.Parameters), len(t.Parameters)))
	}
	return n
}
