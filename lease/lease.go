package lease

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
	"gorm.io/gorm"

	"github.com/npcd/npcd/store"
)

// Defaults of Config.
const (
	DefaultTTL  = 15 * time.Second
	DefaultWait = 2 * time.Second
)

// Config tunes a Manager. Zero fields take their defaults.
type Config struct {
	// TTL is how long a lease lasts unless renewed: how long the NPCs of a
	// daemon that died stay unanswered. Default 15s.
	TTL time.Duration
	// Renew is how often held leases are renewed; default TTL/3.
	Renew time.Duration
	// Idle is how long a lease is kept after its NPC was last used, so
	// that another daemon can take the NPC; default 2×Renew.
	Idle time.Duration
	// Wait bounds how long Hold waits for a lease another daemon holds
	// before it answers *BusyError; default 2s.
	Wait time.Duration
	// Holder names this process in the table; default
	// host/pid/pid-namespace/random, which lets a daemon restarted on the
	// same host take the leases of its former self at once.
	Holder string
	Clock  clockwork.Clock // default: the real clock
	Log    zerolog.Logger
	// Lost, if set, is called with each NPC whose lease a renewal found
	// taken by another daemon, so caches of that NPC can be dropped.
	Lost func(id string)
}

func (c *Config) applyDefaults() error {
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.Renew == 0 {
		c.Renew = c.TTL / 3
	}
	if c.Idle == 0 {
		c.Idle = 2 * c.Renew
	}
	if c.Wait == 0 {
		c.Wait = DefaultWait
	}
	if c.Clock == nil {
		c.Clock = clockwork.NewRealClock()
	}
	if c.Holder == "" {
		c.Holder = defaultHolder()
	}
	switch {
	case c.TTL < 100*time.Millisecond:
		return errors.New("lease: TTL must be at least 100ms")
	case c.Renew <= 0 || c.Renew > c.TTL/2:
		return errors.New("lease: Renew must be positive and at most half the TTL")
	case c.Idle < 0:
		return errors.New("lease: Idle must not be negative")
	case c.Wait < 0:
		return errors.New("lease: Wait must not be negative")
	case len(c.Holder) > 128:
		return errors.New("lease: Holder is longer than 128 bytes")
	}
	return nil
}

// defaultHolder names this process: host/pid/pid namespace/random.
func defaultHolder() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := pidNamespace()
	if ns == "" {
		ns = "-"
	}
	return fmt.Sprintf("%s/%d/%s/%s", host, os.Getpid(), ns, hex.EncodeToString(b[:]))
}

// holderGone reports whether holder names a process of this host and PID
// namespace that no longer runs: a daemon that died (a restart after a
// crash finds its former self there). Its leases need not be waited for.
// Holders of other hosts, or that this process cannot place, are never
// judged gone: their leases expire.
func holderGone(holder string) bool {
	f := strings.Split(holder, "/")
	if len(f) != 4 || f[2] == "-" {
		return false
	}
	host, _ := os.Hostname()
	pid, err := strconv.Atoi(f[1])
	if err != nil || f[0] != host || f[2] != pidNamespace() || pid == os.Getpid() || pid <= 0 {
		return false
	}
	return processGone(pid)
}

// BusyError is a lease another daemon holds: the NPC is theirs for now.
// RetryAfter is when the lease expires unless renewed, at least a second.
type BusyError struct {
	NPC        string
	RetryAfter time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("lease: npc %q is held by another npcd daemon", e.NPC)
}

// Manager takes, renews and releases the leases of one process. It is safe
// for concurrent use.
type Manager struct {
	db  *gorm.DB
	cfg Config

	// dbMu orders the renewal pass (exclusive) after or before any acquiring
	// statement (shared), so a lease released as idle is never one taken
	// again at the same moment.
	dbMu sync.RWMutex

	mu   sync.Mutex
	npcs map[string]*held

	stop    chan struct{}
	done    chan struct{}
	started sync.Once
	stopped sync.Once
	running bool // Start was called
}

// held is what this process knows of one NPC's lease.
type held struct {
	epoch    int64     // the lease's epoch when this process last held it
	holding  bool      // held in the database, as far as this process knows
	until    time.Time // when the lease expires, on this process's clock
	uses     int       // operations running under the lease
	lastUsed time.Time
}

// New builds a Manager over db, whose schema has Migrations applied. Call
// Start to renew in the background and Close to release everything.
func New(db *gorm.DB, cfg Config) (*Manager, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	return &Manager{db: db, cfg: cfg, npcs: map[string]*held{}, stop: make(chan struct{}), done: make(chan struct{})}, nil
}

// Holder is the name this process holds leases under.
func (m *Manager) Holder() string { return m.cfg.Holder }

// Config returns the configuration with defaults applied.
func (m *Manager) Config() Config { return m.cfg }

type noWaitKey struct{}

// NoWait marks ctx so that Hold answers *BusyError at once instead of
// waiting for a lease another daemon holds.
func NoWait(ctx context.Context) context.Context { return context.WithValue(ctx, noWaitKey{}, true) }

// Hold takes NPC id's lease for one operation and returns the function that
// ends the operation (the lease itself is kept until the NPC has been idle
// for Config.Idle). fresh reports that this process did not hold the lease
// before or that another daemon held it since: what this process caches of
// the NPC is stale. A lease held by another live daemon is waited for up to
// Config.Wait, then *BusyError. Holding a lease this process already holds
// costs no database access.
func (m *Manager) Hold(ctx context.Context, id string) (release func(), fresh bool, err error) {
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	if h := m.npcs[id]; h != nil && h.holding && now.Before(h.until.Add(-m.cfg.Renew)) {
		h.uses++
		m.mu.Unlock()
		return m.releaser(id, h), false, nil
	}
	m.mu.Unlock()
	wait := m.cfg.Wait
	if ctx.Value(noWaitKey{}) != nil {
		wait = 0
	}
	deadline := now.Add(wait)
	pause := 20 * time.Millisecond
	reaped := false
	for {
		start := m.cfg.Clock.Now()
		epoch, ok, err := m.acquire(ctx, id, start)
		if err != nil {
			return nil, false, err
		}
		if ok {
			m.mu.Lock()
			h := m.npcs[id]
			if h == nil {
				h = &held{}
				m.npcs[id] = h
			}
			fresh = h.epoch != epoch
			h.epoch, h.holding, h.until = epoch, true, start.Add(m.cfg.TTL)
			h.uses++
			m.mu.Unlock()
			return m.releaser(id, h), fresh, nil
		}
		if !reaped {
			reaped = true
			if gone, err := m.reap(ctx, id); err != nil {
				return nil, false, err
			} else if gone {
				continue
			}
		}
		left := deadline.Sub(m.cfg.Clock.Now())
		if left <= 0 {
			return nil, false, m.busy(ctx, id)
		}
		select {
		case <-ctx.Done():
			return nil, false, fmt.Errorf("lease: waiting for npc %q: %w", id, ctx.Err())
		case <-m.cfg.Clock.After(min(pause, left)):
		}
		pause = min(2*pause, 200*time.Millisecond)
	}
}

func (m *Manager) releaser(id string, h *held) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			h.uses--
			h.lastUsed = m.cfg.Clock.Now()
			m.mu.Unlock()
		})
	}
}

// acquire takes or extends NPC id's lease in one statement: inserted when
// there is none, taken over when it expired or was released, extended when
// this process holds it. The epoch changes whenever the holder does.
func (m *Manager) acquire(ctx context.Context, id string, now time.Time) (epoch int64, ok bool, err error) {
	m.dbMu.RLock()
	defer m.dbMu.RUnlock()
	var epochs []int64
	err = m.db.WithContext(ctx).Raw(`INSERT INTO npc_leases (npc_id, holder, expires_at, epoch) VALUES (?, ?, ?, ?)
ON CONFLICT (npc_id) DO UPDATE SET
  epoch = CASE WHEN npc_leases.holder = excluded.holder THEN npc_leases.epoch ELSE npc_leases.epoch + 1 END,
  holder = excluded.holder, expires_at = excluded.expires_at
WHERE npc_leases.holder = excluded.holder OR npc_leases.expires_at <= ?
RETURNING epoch`, id, m.cfg.Holder, ms(now.Add(m.cfg.TTL)), newEpoch(), ms(now)).Scan(&epochs).Error
	if err != nil {
		return 0, false, fmt.Errorf("lease: take npc %q: %w", id, err)
	}
	if len(epochs) == 0 {
		return 0, false, nil
	}
	return epochs[0], true, nil
}

// reap releases every lease of NPC id's holder when that holder is a
// process of this host that died, and reports whether it did.
func (m *Manager) reap(ctx context.Context, id string) (bool, error) {
	var holders []string
	if err := m.db.WithContext(ctx).Raw(`SELECT holder FROM npc_leases WHERE npc_id = ?`, id).Scan(&holders).Error; err != nil {
		return false, fmt.Errorf("lease: read npc %q: %w", id, err)
	}
	if len(holders) != 1 || !holderGone(holders[0]) {
		return false, nil
	}
	if err := m.db.WithContext(ctx).Exec(`UPDATE npc_leases SET expires_at = 0 WHERE holder = ?`, holders[0]).Error; err != nil {
		return false, fmt.Errorf("lease: release the leases of %s: %w", holders[0], err)
	}
	m.cfg.Log.Info().Str("holder", holders[0]).Msg("released the leases of a daemon of this host that is gone")
	return true, nil
}

// busy builds the error for a lease another daemon holds.
func (m *Manager) busy(ctx context.Context, id string) error {
	var exp []int64
	if err := m.db.WithContext(ctx).Raw(`SELECT expires_at FROM npc_leases WHERE npc_id = ?`, id).Scan(&exp).Error; err != nil {
		return fmt.Errorf("lease: read npc %q: %w", id, err)
	}
	retry := time.Second
	if len(exp) == 1 {
		left := time.UnixMilli(exp[0]).Sub(m.cfg.Clock.Now())
		retry = min(max(retry, left), m.cfg.TTL)
	}
	return &BusyError{NPC: id, RetryAfter: time.Duration(math.Ceil(retry.Seconds())) * time.Second}
}

// Start renews held leases every Config.Renew and releases idle ones,
// until Close.
func (m *Manager) Start() {
	m.started.Do(func() { m.running = true; go m.loop() })
}

func (m *Manager) loop() {
	{
		defer close(m.done)
		t := m.cfg.Clock.NewTicker(m.cfg.Renew)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.Chan():
			}
			ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Renew)
			if err := m.Renew(ctx); err != nil {
				m.cfg.Log.Warn().Err(err).Msg("lease renewal failed; leases stay held until they expire")
			}
			cancel()
		}
	}
}

// renewBatch bounds the NPCs named in one statement.
const renewBatch = 500

// Renew extends every lease in use or used within Config.Idle, and releases
// the others. A lease found held by another daemon is dropped and reported
// to Config.Lost. The background loop calls it; tests call it directly.
func (m *Manager) Renew(ctx context.Context) error {
	m.dbMu.Lock()
	defer m.dbMu.Unlock()
	now := m.cfg.Clock.Now()
	var keep, idle []string
	m.mu.Lock()
	for id, h := range m.npcs {
		switch {
		case !h.holding:
		case h.uses > 0 || now.Sub(h.lastUsed) < m.cfg.Idle:
			keep = append(keep, id)
		default:
			h.holding = false
			idle = append(idle, id)
		}
	}
	m.mu.Unlock()
	var errs []error
	for chunk := range slices.Chunk(idle, renewBatch) {
		if err := m.db.WithContext(ctx).Exec(`UPDATE npc_leases SET expires_at = 0 WHERE holder = ? AND npc_id IN ?`, m.cfg.Holder, chunk).Error; err != nil {
			errs = append(errs, fmt.Errorf("lease: release: %w", err))
		}
	}
	var lost []string
	for chunk := range slices.Chunk(keep, renewBatch) {
		var renewed []string
		err := m.db.WithContext(ctx).Raw(`UPDATE npc_leases SET expires_at = ? WHERE holder = ? AND npc_id IN ? RETURNING npc_id`,
			ms(now.Add(m.cfg.TTL)), m.cfg.Holder, chunk).Scan(&renewed).Error
		if err != nil {
			errs = append(errs, fmt.Errorf("lease: renew: %w", err))
			continue
		}
		ok := make(map[string]bool, len(renewed))
		for _, id := range renewed {
			ok[id] = true
		}
		m.mu.Lock()
		for _, id := range chunk {
			h := m.npcs[id]
			if ok[id] {
				h.until = now.Add(m.cfg.TTL)
				continue
			}
			h.holding = false
			lost = append(lost, id)
			if h.uses > 0 {
				m.cfg.Log.Warn().Str("npc", id).Msg("lease of an npc in use was taken by another daemon; renewals came too late")
			}
		}
		m.mu.Unlock()
	}
	for _, id := range lost {
		if m.cfg.Lost != nil {
			m.cfg.Lost(id)
		}
	}
	return errors.Join(errs...)
}

// Close stops renewing and releases every lease this process holds, so
// other daemons take its NPCs at once. Operations still running lose their
// lease with it; close the engine first.
func (m *Manager) Close(ctx context.Context) error {
	m.started.Do(func() {}) // no Start after Close
	m.stopped.Do(func() { close(m.stop) })
	if m.running {
		<-m.done
	}
	m.dbMu.Lock()
	defer m.dbMu.Unlock()
	m.mu.Lock()
	for _, h := range m.npcs {
		h.holding = false
	}
	m.mu.Unlock()
	if err := m.db.WithContext(ctx).Exec(`UPDATE npc_leases SET expires_at = 0 WHERE holder = ?`, m.cfg.Holder).Error; err != nil {
		return fmt.Errorf("lease: release all: %w", err)
	}
	return nil
}

// Held reports whether this process holds NPC id's lease, as far as it
// knows, for tests and metrics.
func (m *Manager) Held(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.npcs[id]
	return h != nil && h.holding
}

func ms(t time.Time) int64 { return t.UnixMilli() }

// newEpoch is the epoch of a lease row inserted for the first time: random,
// so a row deleted and inserted again by hand still changes epoch.
func newEpoch() int64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return int64(binary.BigEndian.Uint64(b[:]) >> 2)
}

// Migrations is the lease table's schema.
func Migrations() []store.Migration {
	return []store.Migration{{
		Component: "lease", Version: 1, Name: "npc_leases",
		Up: func(tx *gorm.DB) error {
			if err := tx.Exec(`CREATE TABLE npc_leases (
  npc_id VARCHAR(64) PRIMARY KEY,
  holder VARCHAR(128) NOT NULL,
  expires_at BIGINT NOT NULL,
  epoch BIGINT NOT NULL
)`).Error; err != nil {
				return err
			}
			return tx.Exec(`CREATE INDEX npc_leases_holder ON npc_leases (holder)`).Error
		},
	}}
}
