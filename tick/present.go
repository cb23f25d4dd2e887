package tick

import (
	"context"
	"slices"
	"sync"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/internal/gencache"
	"github.com/npcd/npcd/internal/text"
	"github.com/npcd/npcd/llm"
)

// presentCache keeps, per NPC and profile key, the line a tick's working
// context shows of the profile (or that the NPC holds none under the key),
// with the NPC's profile revision it was read at (character.Glance's
// ProfileRev). A tick whose glance read the same revision shows the lines
// kept instead of reading the profiles again: the revision moves with
// every change of what a line shows, whoever makes it (triggers of
// migration character v10), and never goes back, an NPC deleted and
// created again included. A glance that read no revision (PostgreSQL)
// leaves the cache out.
type presentCache struct {
	mu sync.Mutex
	c  gencache.Cache[presentKey, presentLine]
	// reads counts the ticks that read the profiles from the database
	// with a revision at hand (not found kept, or kept at another).
	reads int64
}

type presentKey struct{ npc, key string }

type presentLine struct {
	rev  int64
	line string // "" for no profile
}

// DefaultProfileCacheBytes is Config.ProfileCacheBytes's default.
const DefaultProfileCacheBytes = 16 << 20

// presentMaxLine is the longest line the cache keeps: a profile of many
// facts is read each time. presentEntryBytes is what an entry costs
// beside its strings' bytes (the map's slot, the strings' headers, the
// revision), counted against the cache's bound.
const (
	presentMaxLine    = 2048
	presentEntryBytes = 96
)

// newPresentCache returns a cache of lines of at most bytes in all: two
// generations of half each (gencache), an entry's size its strings' bytes
// and presentEntryBytes.
func newPresentCache(bytes int64) *presentCache {
	half := int(bytes / 2)
	return &presentCache{c: gencache.NewSized[presentKey, presentLine](half, min(half/512, 4096))}
}

// presentSize is what an entry of NPC id's line under key costs the cache.
func presentSize(id, key, line string) int {
	return len(id) + len(key) + len(line) + presentEntryBytes
}

// presentKeys returns the profile keys of names, each once, in the order
// of the keys (the order character.Store.Profiles gives on SQLite).
func presentKeys(names []string) []string {
	keys := make([]string, 0, len(names))
	for _, n := range names {
		keys = append(keys, character.EntityKey(n))
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// lines returns the kept lines of NPC id's profiles under keys, in order,
// and whether every key was kept at revision rev.
func (p *presentCache) lines(id string, keys []string, rev int64) ([]string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, k := range keys {
		v, fresh, ok := p.c.Get(presentKey{id, k})
		if !ok || v.rev != rev {
			return nil, false
		}
		if !fresh {
			p.c.PutSized(presentKey{id, k}, v, presentSize(id, k, v.line))
		}
		if v.line != "" {
			out = append(out, v.line)
		}
	}
	return out, true
}

// keep stores the lines of NPC id's profiles under keys as read at
// revision rev: lines[key], none for a key without a profile.
func (p *presentCache) keep(id string, keys []string, lines map[string]string, rev int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	for _, k := range keys {
		l := lines[k]
		if len(l) > presentMaxLine {
			continue
		}
		p.c.PutSized(presentKey{id, k}, presentLine{rev: rev, line: l}, presentSize(id, k, l))
	}
}

// presentLines returns the lines the working context shows of the
// profiles of names, those NPC id holds, in the order of their keys: kept
// ones when the glance read the NPC's profile revision (rev non-nil) and
// it is the one they were read at, else read from the database (and kept).
func (e *Engine) presentLines(ctx context.Context, id string, names []string, rev *int64) ([]string, error) {
	var keys []string
	if rev != nil {
		keys = presentKeys(names)
		if lines, ok := e.present.lines(id, keys, *rev); ok {
			return lines, nil
		}
	}
	ps, err := e.deps.Characters.Profiles(ctx, id, names...)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ps))
	var byKey map[string]string
	if rev != nil {
		byKey = make(map[string]string, len(ps))
	}
	for _, p := range ps {
		l := text.OneLine(llm.Defuse(profileLine(p)))
		out = append(out, l)
		if byKey != nil {
			byKey[p.Entity] = l
		}
	}
	if rev != nil {
		e.present.keep(id, keys, byKey, *rev)
	}
	return out, nil
}
