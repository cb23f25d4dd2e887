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

// presentBound is how many lines a generation of the cache holds, and
// presentMaxLine the longest line it keeps (a profile of many facts is
// read each time): at most some 16 MiB in all, typically a few hundred
// bytes a line.
const (
	presentBound   = 4096
	presentMaxLine = 2048
)

func newPresentCache() *presentCache {
	return &presentCache{c: gencache.New[presentKey, presentLine](presentBound)}
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
			p.c.Put(presentKey{id, k}, v)
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
		p.c.Put(presentKey{id, k}, presentLine{rev: rev, line: l})
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
