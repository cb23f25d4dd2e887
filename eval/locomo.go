package eval

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/llm"
	"github.com/npcd/npcd/store"
	"github.com/npcd/npcd/tick"
	"github.com/npcd/npcd/tools"
)

// Defaults of Options.
const (
	DefaultWindow = 4096
)

// DefaultKs are the cut-offs recall is scored at when Options.Ks is empty.
var DefaultKs = []int{5, 10}

// Categories names LoCoMo's question categories.
var Categories = map[int]string{1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}

// headline reports whether a category counts in the headline: adversarial
// questions (5) ask about what was never said, so recall of their evidence
// says little about memory and the benchmark's convention leaves them out.
func headline(category int) bool { return category >= 1 && category <= 4 }

// ErrInput reports a bad option or a malformed benchmark file.
var ErrInput = errors.New("eval: bad input")

// ListenerPersona is the persona of the NPC that listens to each
// conversation: neutral, so the replay measures memory, not character.
const ListenerPersona = "You are Listener, a quiet companion who sits with two friends while they talk. " +
	"You listen closely, say little, and remember what each of them tells the other."

// Options configure LoCoMo.
type Options struct {
	// Events and Questions are the benchmark's JSONL files. Required.
	Events, Questions string
	// Window is the listener's context window in tokens; small enough that
	// compaction runs during the replay. Default DefaultWindow.
	Window int
	// Ks are the cut-offs recall is scored at, each in [1, journal.MaxK].
	// Default DefaultKs.
	Ks []int
	// Conversations, when not empty, restricts the run to these
	// conversation ids; an id the events file lacks is an error.
	Conversations []string
	// Progress, when set, shows a progress bar on it while the replay runs
	// (typically os.Stderr).
	Progress io.Writer
	// Dir is where each conversation's temporary database is made; default
	// os.TempDir(). Databases are removed when their conversation is scored.
	Dir string
	// Retrieval options for the journal.Retriever built for each
	// conversation.
	Retrieval []journal.Option
	// Migrations run after those of character and journal on each
	// conversation's database: the schema of what Configure adds.
	Migrations []store.Migration
	// Configure, when set, is called with each conversation's database and
	// engine dependencies before the engine is built, to add what this
	// package does not wire (the compactor). The questions are put to
	// deps.Retriever as Configure leaves it; Internals defaults to the
	// internal tools over that retriever.
	Configure func(ctx context.Context, db *gorm.DB, deps *tick.Deps) error
	// AfterSession, when set, runs after the last turn of each session of a
	// conversation (a sleep, once sleeps exist).
	AfterSession func(ctx context.Context, eng *tick.Engine, npc string, session int) error
	// Details adds every question's outcome to the report.
	Details bool
	// Baseline also scores plain BM25 over the raw turn texts (SQLite FTS5,
	// no stemming), the reference the memory search is compared with, and
	// scores the memory search at the baseline's token budget: for each
	// question, recall among the leading results whose contents together
	// take no more tokens than the baseline returned for that question.
	Baseline bool
	// Ablate, when not empty, switches off one signal of the memory search
	// (a name of Ablations), so its worth is the difference with a run
	// that keeps it.
	Ablate string
}

// Ablations names the signals Options.Ablate can switch off, with what
// switching each off means.
var Ablations = map[string]string{
	"vector":     "no vector similarity (keyword only)",
	"keyword":    "no keyword (BM25) similarity (vector only)",
	"neighbours": "no relevance borrowed from neighbouring turns",
	"window":     "no joining of neighbouring turns into one result",
	"recency":    "no recency on the game clock",
	"importance": "no importance",
	"dates":      "relative dates kept as said, not grounded",
	"morphology": "no expansion of query words to words of the same root",
	"entity":     "no gain for what the people a query names said or are",
	"semantic":   "no similarity of meaning from offline word vectors",
	"session":    "no gain for what was said on the game day of the best matches",
	"length":     "BM25's usual length normalization (b = 0.75) instead of the lowered one",
	"feedback":   "no search for the telling words of the best matches (pseudo-relevance feedback)",
}

// ablation returns the retrieval options that switch signal name off, and
// whether the journal keeps relative dates raw.
func ablation(name string) (opts []journal.Option, rawDates bool) {
	switch name {
	case "vector":
		return []journal.Option{journal.WithWeights(0, journal.DefaultKeywordWeight)}, false
	case "keyword":
		return []journal.Option{journal.WithWeights(journal.DefaultVectorWeight, 0)}, false
	case "neighbours":
		return []journal.Option{journal.WithNeighbours(0)}, false
	case "window":
		return []journal.Option{journal.WithWindow(0, 1, 0)}, false
	case "recency":
		return []journal.Option{journal.WithRecency(0, journal.DefaultImportanceWeight)}, false
	case "importance":
		return []journal.Option{journal.WithRecency(journal.DefaultRecencyWeight, 0)}, false
	case "entity":
		return []journal.Option{journal.WithEntity(0)}, false
	case "semantic":
		return []journal.Option{journal.WithSemantic(0)}, false
	case "feedback":
		return []journal.Option{journal.WithFeedback(0)}, false
	case "length":
		return []journal.Option{journal.WithLengthNorm(0.75)}, false
	case "session":
		return []journal.Option{journal.WithSession(0)}, false
	case "morphology":
		return []journal.Option{journal.WithExpansion(0)}, false
	case "dates":
		return nil, true
	}
	return nil, false
}

// event is one line of the events file.
type event struct {
	Conv         string `json:"conv"`
	Session      int    `json:"session"`
	Turn         int    `json:"turn"`
	Seq          int    `json:"seq"`
	Time         string `json:"time"`
	Speaker      string `json:"speaker"`
	DiaID        string `json:"dia_id"`
	Text         string `json:"text"`
	ImageCaption string `json:"image_caption"`
}

// question is one line of the questions file.
type question struct {
	Conv     string   `json:"conv"`
	QID      string   `json:"qid"`
	Question string   `json:"question"`
	Evidence []string `json:"evidence"`
	Category int      `json:"category"`
}

// outcome is how one question scored.
type outcome struct {
	q      question
	recall []float64  // per k, in Ks order
	tokens int        // of the contents returned at the largest k
	refs   [][]string // event refs of each result, best first
	// budget scores, when there is a budget: recall and tokens of the
	// leading results that fit in it.
	budgeted     bool
	budgetRecall float64
	budgetTokens int
}

// LoCoMo replays the conversations of a LoCoMo-format benchmark through a
// real tick.Engine, one listening NPC per conversation on its own temporary
// SQLite database with the builtin model, and scores the NPC's memory search
// on the benchmark's questions by evidence recall@k. Every turn becomes a
// "say" event whose id is the turn's dia_id, from its speaker, at its time,
// with a shared photo appended as "[shares a photo: …]"; a tick follows
// every turn. Questions without evidence are skipped and counted.
func LoCoMo(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	events, order, err := readEvents(opts.Events)
	if err != nil {
		return nil, err
	}
	questions, err := readQuestions(opts.Questions)
	if err != nil {
		return nil, err
	}
	convs := order
	if len(opts.Conversations) > 0 {
		convs = nil
		for _, c := range opts.Conversations {
			if _, ok := events[c]; !ok {
				return nil, fmt.Errorf("%w: conversation %q is not in %s", ErrInput, c, opts.Events)
			}
			convs = append(convs, c)
		}
	}
	prog := newProgress(opts.Progress)
	defer prog.stop()
	rep := &Report{Window: opts.Window, Ks: opts.Ks, Ablated: opts.Ablate}
	var mine, base []outcome
	for _, conv := range convs {
		var qs []question
		for _, q := range questions[conv] {
			if len(q.Evidence) == 0 {
				rep.Skipped++
				continue
			}
			qs = append(qs, q)
		}
		cr, err := runConversation(ctx, opts, conv, events[conv], qs, prog)
		if err != nil {
			return nil, fmt.Errorf("eval: conversation %q: %w", conv, err)
		}
		rep.Conversations = append(rep.Conversations, cr.stats)
		mine = append(mine, cr.outcomes...)
		base = append(base, cr.baseline...)
	}
	rep.Scores = summarize(mine, opts.Ks)
	if opts.Baseline {
		b := summarize(base, opts.Ks)
		rep.Baseline = &b
	}
	if opts.Details {
		for _, o := range mine {
			rep.Questions = append(rep.Questions, o.result(opts.Ks))
		}
	}
	return rep, nil
}

func (o *Options) validate() error {
	if o.Events == "" || o.Questions == "" {
		return fmt.Errorf("%w: the events and questions files are required", ErrInput)
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.Window < character.MinContextWindow {
		return fmt.Errorf("%w: window %d is below %d tokens", ErrInput, o.Window, character.MinContextWindow)
	}
	if len(o.Ks) == 0 {
		o.Ks = DefaultKs
	}
	if _, ok := Ablations[o.Ablate]; o.Ablate != "" && !ok {
		names := slices.Sorted(maps.Keys(Ablations))
		return fmt.Errorf("%w: nothing to ablate named %q (one of %s)", ErrInput, o.Ablate, strings.Join(names, ", "))
	}
	ks := slices.Clone(o.Ks)
	slices.Sort(ks)
	ks = slices.Compact(ks)
	for _, k := range ks {
		if k < 1 || k > journal.MaxK {
			return fmt.Errorf("%w: k %d is not in [1, %d]", ErrInput, k, journal.MaxK)
		}
	}
	o.Ks = ks
	return nil
}

// convResult is one replayed conversation.
type convResult struct {
	stats    ConversationStats
	outcomes []outcome
	baseline []outcome
}

func runConversation(ctx context.Context, opts Options, conv string, evs []event, qs []question, prog *progressBar) (convResult, error) {
	var cr convResult
	dir, err := os.MkdirTemp(opts.Dir, "npcd-eval-*")
	if err != nil {
		return cr, fmt.Errorf("temporary database: %w", err)
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(ctx, filepath.Join(dir, "eval.db"), store.Options{})
	if err != nil {
		return cr, err
	}
	defer store.Close(db)
	migs := append(character.Migrations(), journal.Migrations()...)
	if err := store.Migrate(ctx, db, append(migs, opts.Migrations...)); err != nil {
		return cr, err
	}
	chars := character.NewStore(db)
	jour := journal.NewStore(db)
	off, rawDates := ablation(opts.Ablate)
	if rawDates {
		jour = jour.KeepingRelativeDates()
	}
	// The ablation comes last, so it wins over the caller's options.
	ret, err := journal.NewRetriever(jour, append(slices.Clone(opts.Retrieval), off...)...)
	if err != nil {
		return cr, err
	}
	deps := tick.Deps{DB: db, Characters: chars, Journal: jour, Retriever: ret, Builtin: llm.NewBuiltin(),
		Owners: []tick.Owner{jour, ret}}
	if opts.Configure != nil {
		if err := opts.Configure(ctx, db, &deps); err != nil {
			return cr, fmt.Errorf("configure: %w", err)
		}
	}
	if deps.Internals == nil {
		deps.Internals = tools.NewInternals(deps.Retriever, chars)
	}
	eng, err := tick.New(deps, tick.Config{})
	if err != nil {
		return cr, err
	}
	defer eng.Close(context.WithoutCancel(ctx))

	npc := slug(conv)
	if _, err := eng.PutNPC(ctx, &character.Character{ID: npc, Name: "Listener", Persona: ListenerPersona, ContextWindow: opts.Window}); err != nil {
		return cr, err
	}
	replay := prog.track(conv+" replay", len(evs))
	session := 0
	for i, ev := range evs {
		if i > 0 && ev.Session != session && opts.AfterSession != nil {
			if err := opts.AfterSession(ctx, eng, npc, session); err != nil {
				return cr, fmt.Errorf("after session %d: %w", session, err)
			}
		}
		session = ev.Session
		at, err := parseTime(ev.Time)
		if err != nil {
			return cr, fmt.Errorf("turn %s: %w", ev.DiaID, err)
		}
		in := tick.EventInput{ID: ev.DiaID, Kind: "say", Actor: ev.Speaker, Text: turnText(ev), At: at}
		if _, _, err := eng.PostEvents(ctx, npc, []tick.EventInput{in}); err != nil {
			return cr, fmt.Errorf("turn %s: %w", ev.DiaID, err)
		}
		if _, err := eng.Tick(ctx, npc); err != nil {
			return cr, fmt.Errorf("tick after turn %s: %w", ev.DiaID, err)
		}
		replay.inc()
	}
	if len(evs) > 0 && opts.AfterSession != nil {
		if err := opts.AfterSession(ctx, eng, npc, session); err != nil {
			return cr, fmt.Errorf("after session %d: %w", session, err)
		}
	}
	replay.done()
	c, err := chars.Get(ctx, npc)
	if err != nil {
		return cr, err
	}
	cr.stats = ConversationStats{Conversation: conv, Turns: len(evs), Questions: len(qs), Compactions: c.State.Compactions,
		LiveMessages: c.State.LiveMessages, ArchivedMessages: c.State.ArchivedMessages}

	counter := llm.NewCounter(llm.BuiltinModel)
	maxK := opts.Ks[len(opts.Ks)-1]
	budgets := make([]int, len(qs))
	if opts.Baseline {
		b, err := baseline(ctx, db, evs, qs, opts.Ks, counter)
		if err != nil {
			return cr, fmt.Errorf("baseline: %w", err)
		}
		cr.baseline = b
		for i, o := range b {
			budgets[i] = o.tokens
		}
	}
	scoring := prog.track(conv+" questions", len(qs))
	for i, q := range qs {
		rs, err := deps.Retriever.Search(ctx, npc, q.Question, maxK)
		if err != nil {
			return cr, fmt.Errorf("question %s: %w", q.QID, err)
		}
		refs := make([][]string, len(rs))
		contents := make([]string, len(rs))
		for i, r := range rs {
			refs[i], contents[i] = r.Sources.EventRefs, r.Content
		}
		o := score(q, refs, contents, opts.Ks, counter)
		if opts.Baseline {
			o.budgeted = true
			o.budgetRecall, o.budgetTokens = withinBudget(q, refs, contents, budgets[i], counter)
		}
		cr.outcomes = append(cr.outcomes, o)
		scoring.inc()
	}
	scoring.done()
	return cr, nil
}

// score computes a question's recall at each k from the event refs of the
// ranked results, and the tokens of the contents returned at the largest k.
func score(q question, refs [][]string, contents []string, ks []int, counter *llm.Counter) outcome {
	want := map[string]bool{}
	for _, e := range q.Evidence {
		want[strings.TrimSpace(e)] = true
	}
	o := outcome{q: q, recall: make([]float64, len(ks)), refs: refs}
	for ki, k := range ks {
		found := map[string]bool{}
		for i := 0; i < k && i < len(refs); i++ {
			for _, r := range refs[i] {
				if want[r] {
					found[r] = true
				}
			}
		}
		o.recall[ki] = float64(len(found)) / float64(len(want))
	}
	for i := 0; i < len(contents) && i < ks[len(ks)-1]; i++ {
		o.tokens += counter.Text(contents[i])
	}
	return o
}

// withinBudget scores the longest run of leading results whose contents
// take at most budget tokens.
func withinBudget(q question, refs [][]string, contents []string, budget int, counter *llm.Counter) (recall float64, tokens int) {
	n := 0
	for n < len(contents) {
		t := counter.Text(contents[n])
		if tokens+t > budget {
			break
		}
		tokens += t
		n++
	}
	o := score(q, refs[:n], contents[:n], []int{max(n, 1)}, counter)
	return o.recall[0], tokens
}

// turnText is the text of a turn as the NPC perceives it.
func turnText(ev event) string {
	text := strings.TrimSpace(ev.Text)
	if c := strings.TrimSpace(ev.ImageCaption); c != "" {
		text = strings.TrimSpace(text + " [shares a photo: " + c + "]")
	}
	const limit = 4000 // below the engine's default event text bound
	if len(text) > limit {
		text = text[:limit]
	}
	return text
}

func parseTime(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02T15:04:05", time.RFC3339, "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%w: time %q", ErrInput, s)
}

// slug turns a conversation id into an NPC id.
func slug(conv string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(conv) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
		if b.Len() == 64 {
			break
		}
	}
	if b.Len() == 0 {
		return "conv"
	}
	return b.String()
}

// readEvents reads the events file, grouped by conversation in seq order,
// with the conversations in order of first appearance.
func readEvents(path string) (map[string][]event, []string, error) {
	out := map[string][]event{}
	var order []string
	err := readJSONL(path, func(line int, b []byte) error {
		var ev event
		if err := json.Unmarshal(b, &ev); err != nil {
			return fmt.Errorf("%w: %s:%d: %v", ErrInput, path, line, err)
		}
		if ev.Conv == "" || ev.DiaID == "" || ev.Speaker == "" {
			return fmt.Errorf("%w: %s:%d: conv, dia_id and speaker are required", ErrInput, path, line)
		}
		if _, ok := out[ev.Conv]; !ok {
			order = append(order, ev.Conv)
		}
		out[ev.Conv] = append(out[ev.Conv], ev)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	for _, evs := range out {
		slices.SortStableFunc(evs, func(a, b event) int { return a.Seq - b.Seq })
	}
	return out, order, nil
}

// readQuestions reads the questions file grouped by conversation, in file
// order.
func readQuestions(path string) (map[string][]question, error) {
	out := map[string][]question{}
	err := readJSONL(path, func(line int, b []byte) error {
		var q question
		if err := json.Unmarshal(b, &q); err != nil {
			return fmt.Errorf("%w: %s:%d: %v", ErrInput, path, line, err)
		}
		if q.Conv == "" || strings.TrimSpace(q.Question) == "" {
			return fmt.Errorf("%w: %s:%d: conv and question are required", ErrInput, path, line)
		}
		if _, ok := Categories[q.Category]; !ok {
			return fmt.Errorf("%w: %s:%d: category %d is not 1–5", ErrInput, path, line, q.Category)
		}
		out[q.Conv] = append(out[q.Conv], q)
		return nil
	})
	return out, err
}

func readJSONL(path string, fn func(line int, b []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for n := 1; sc.Scan(); n++ {
		b := sc.Bytes()
		if len(strings.TrimSpace(string(b))) == 0 {
			continue
		}
		if err := fn(n, b); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("eval: read %s: %w", path, err)
	}
	return nil
}
