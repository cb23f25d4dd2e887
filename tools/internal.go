package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/npcd/npcd/internal/text"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/store"
)

// Names of the internal tools.
const (
	JournalWrite  = "journal_write"
	ProfileUpdate = "profile_update"
	MemorySearch  = "memory_search"
	RecallArchive = "recall_archive"
)

// Searcher finds what an NPC remembers.
type Searcher interface {
	Search(ctx context.Context, npc, query string, k int) ([]journal.Result, error)
}

// Archive reads stored messages, live or archived.
type Archive interface {
	MessageByID(ctx context.Context, npc string, id int64) (*character.Message, error)
}

// Writers are the stores an Effect writes through, bound to the transaction
// that commits the tick.
type Writers struct {
	Journal    *journal.Store
	Characters *character.Store
}

// Effect is a write an internal tool asks for. Effects are applied when the
// tick commits, in the same transaction as the turn's messages, so a tick
// that fails writes nothing and a retried tick writes once.
type Effect func(ctx context.Context, w Writers) error

// Call is one internal tool call to run.
type Call struct {
	NPC       string
	ID        string
	Name      string
	Args      map[string]any // validated against the tool's schema
	GameTime  time.Time
	EventRefs []string // the game events the turn answers
}

// Result is what an internal tool returns: the text sent back to the model
// and the writes to commit with the turn.
type Result struct {
	Content string
	Effects []Effect
}

// Internals runs npcd's internal tools. It is safe for concurrent use.
type Internals struct {
	search  Searcher
	archive Archive
}

// NewInternals returns the internal tools over a searcher and an archive.
func NewInternals(search Searcher, archive Archive) *Internals {
	return &Internals{search: search, archive: archive}
}

// RecallChunk is how much of a stored message one recall_archive call returns.
const RecallChunk = 6000

// Tools returns the internal tool definitions.
func (in *Internals) Tools() []Tool {
	return []Tool{
		{Name: JournalWrite, Description: "Note what you must not forget: promises, debts, plans, things learned.",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"content":{"type":"string","minLength":1,"maxLength":2000},` +
				`"importance":{"type":"integer","minimum":1,"maximum":10},` +
				`"type":{"type":"string","enum":["note","observation","reflection","fact"]}},` +
				`"required":["content"],"additionalProperties":false}`)},
		{Name: ProfileUpdate, Description: "Record what you learn about someone: a description, a fact (a fact with the same key replaces the old), a change in feelings (-1 to 1).",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"entity":{"type":"string","minLength":1,"maxLength":128},` +
				`"kind":{"type":"string","maxLength":32},` +
				`"description":{"type":"string","maxLength":2000},` +
				`"fact":{"type":"string","maxLength":1000},` +
				`"key":{"type":"string","maxLength":64},` +
				`"relationship":{"type":"object","maxProperties":8,"additionalProperties":{"type":"number","minimum":-1,"maximum":1}}},` +
				`"required":["entity"],"additionalProperties":false}`)},
		{Name: MemorySearch, Description: "Search your memories, journal and past conversations for what someone mentions that you cannot see here.",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"query":{"type":"string","minLength":1,"maxLength":500},` +
				`"k":{"type":"integer","minimum":1,"maximum":20}},` +
				`"required":["query"],"additionalProperties":false}`)},
		{Name: RecallArchive, Description: "Read again, in full, the message a masked or shortened observation names by id.",
			Parameters: json.RawMessage(`{"type":"object","properties":{` +
				`"id":{"type":"integer","minimum":1},` +
				`"offset":{"type":"integer","minimum":0}},` +
				`"required":["id"],"additionalProperties":false}`)},
	}
}

// Run executes one internal tool call. Failures the model can act on are
// returned as result text; only storage failures are errors.
func (in *Internals) Run(ctx context.Context, c Call) (Result, error) {
	switch c.Name {
	case JournalWrite:
		return in.journalWrite(c), nil
	case ProfileUpdate:
		return in.profileUpdate(c), nil
	case MemorySearch:
		return in.memorySearch(ctx, c)
	case RecallArchive:
		return in.recallArchive(ctx, c)
	}
	return Result{}, fmt.Errorf("%w: %q", ErrUnknownTool, c.Name)
}

func str(args map[string]any, k string) string {
	s, _ := args[k].(string)
	return strings.TrimSpace(s)
}

func num(args map[string]any, k string, def int) int {
	if f, ok := args[k].(float64); ok {
		return int(f)
	}
	return def
}

func (in *Internals) journalWrite(c Call) Result {
	content := str(c.Args, "content")
	typ := str(c.Args, "type")
	if typ == "" {
		typ = journal.TypeNote
	}
	imp := num(c.Args, "importance", 0)
	if imp == 0 {
		imp = journal.Importance("note", content)
	}
	e := &journal.Entry{Type: typ, Content: content, Importance: imp, GameTime: c.GameTime,
		Metadata: store.NewJSON(map[string]any{"written_by": "model", "call_id": c.ID})}
	e.Sources.V.EventRefs = c.EventRefs
	return Result{
		Content: fmt.Sprintf("noted in your journal (importance %d)", e.Importance),
		Effects: []Effect{func(ctx context.Context, w Writers) error { return w.Journal.Add(ctx, c.NPC, e) }},
	}
}

func (in *Internals) profileUpdate(c Call) Result {
	entity := str(c.Args, "entity")
	u := character.ProfileUpdate{Entity: entity, Kind: str(c.Args, "kind"), Description: str(c.Args, "description")}
	if rel, ok := c.Args["relationship"].(map[string]any); ok {
		u.RelationshipDelta = map[string]float64{}
		for k, v := range rel {
			if f, ok := v.(float64); ok {
				u.RelationshipDelta[text.Clip(k, 32)] = f
			}
		}
	}
	fact := str(c.Args, "fact")
	key := str(c.Args, "key")
	var did []string
	if u.Kind != "" || u.Description != "" || len(u.RelationshipDelta) > 0 {
		did = append(did, "profile updated")
	}
	if fact != "" {
		did = append(did, "fact recorded")
	}
	if len(did) == 0 {
		return Result{Content: fmt.Sprintf("nothing to update for %s: give a description, kind, fact or relationship", entity)}
	}
	gameTime := c.GameTime
	refs := c.EventRefs
	effect := func(ctx context.Context, w Writers) error {
		if _, err := w.Characters.UpsertProfile(ctx, c.NPC, u); err != nil {
			return err
		}
		if fact == "" {
			return nil
		}
		_, _, err := w.Characters.AddFact(ctx, c.NPC, character.Fact{Entity: entity, Key: key, Content: fact, Source: "tool",
			ValidFrom: gameTime, Sources: store.NewJSON(character.Sources{EventRefs: refs})})
		return err
	}
	return Result{Content: fmt.Sprintf("%s: %s", entity, strings.Join(did, ", ")), Effects: []Effect{effect}}
}

func (in *Internals) memorySearch(ctx context.Context, c Call) (Result, error) {
	query := str(c.Args, "query")
	k := num(c.Args, "k", 5)
	rs, err := in.search.Search(ctx, c.NPC, query, k)
	if err != nil {
		return Result{}, fmt.Errorf("memory_search: %w", err)
	}
	if len(rs) == 0 {
		return Result{Content: fmt.Sprintf("nothing found for %q", query)}, nil
	}
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "- [%s %d, %s] %s\n", r.Kind, r.ID, r.GameTime.Format("2006-01-02"), text.Clip(text.OneLine(r.Content), 600))
	}
	return Result{Content: strings.TrimRight(b.String(), "\n")}, nil
}

func (in *Internals) recallArchive(ctx context.Context, c Call) (Result, error) {
	id := int64(num(c.Args, "id", 0))
	offset := num(c.Args, "offset", 0)
	m, err := in.archive.MessageByID(ctx, c.NPC, id)
	if errors.Is(err, character.ErrNotFound) {
		return Result{Content: fmt.Sprintf("error: there is no stored message %d", id)}, nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("recall_archive: %w", err)
	}
	content := m.Content
	if offset >= len(content) {
		return Result{Content: fmt.Sprintf("message %d has only %d bytes", id, len(content))}, nil
	}
	// Chunk edges move back to a rune boundary, so every chunk is valid
	// text and following the offset hints returns the message whole.
	for offset > 0 && !utf8.RuneStart(content[offset]) {
		offset--
	}
	end := min(len(content), offset+RecallChunk)
	for end < len(content) && end > offset && !utf8.RuneStart(content[end]) {
		end--
	}
	chunk := content[offset:end]
	header := fmt.Sprintf("message %d (%s", id, m.Role)
	if m.ToolName != "" {
		header += ", " + m.ToolName + " result"
	}
	header += fmt.Sprintf(", turn %d, %s):\n", m.Turn, m.State)
	if end < len(content) || offset > 0 {
		chunk += fmt.Sprintf("\n[bytes %d-%d of %d", offset, end, len(content))
		if end < len(content) {
			chunk += fmt.Sprintf("; call recall_archive with id %d and offset %d for more", id, end)
		}
		chunk += "]"
	}
	return Result{Content: header + chunk}, nil
}
