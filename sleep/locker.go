package sleep

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"gorm.io/gorm"

	"github.com/npcd/npcd/lease"
	"github.com/npcd/npcd/store"
)

// ErrSlotTaken is a scheduled sleep another daemon already ran (or is
// running) for the same minute.
var ErrSlotTaken = errors.New("sleep: this slot's sleep was taken by another daemon")

// SlotLocker is gocron's distributed Locker backed by the database, so that
// daemons sharing one database with the same schedules run each NPC's
// scheduled sleep once. A job's run is keyed by its name (one per NPC, see
// JobName) and its slot: the minute it fired in, on the daemon's own clock
// (schedules have a minute's resolution and gocron fires at the start of
// the minute, so daemons whose clocks differ by less than a minute agree on
// the slot). The first daemon to insert the row (job, slot) into sleep_runs
// runs the sleep; the others skip it. The rows stay as the record of who ran
// which sleep and are pruned after RunsKept.
//
// With a hold function (the NPC leases), the slot goes to the daemon that
// holds the NPC: a daemon takes the slot only once it holds the NPC's lease,
// which it keeps until the sleep ends; while another daemon holds the NPC,
// it waits (up to SlotWait) for that daemon to take the slot, and takes it
// itself if the lease comes free.
type SlotLocker struct {
	db     *gorm.DB
	holder string
	clock  clockwork.Clock
	hold   HoldFunc

	mu        sync.Mutex
	lastPrune time.Time
}

// RunsKept is how long sleep_runs rows are kept.
const RunsKept = 30 * 24 * time.Hour

// HoldFunc takes an NPC's lease without waiting for another daemon's: a
// *lease.BusyError when another daemon holds it. release ends the hold.
type HoldFunc func(ctx context.Context, id string) (release func(), err error)

// SlotWait bounds how long a daemon that does not hold an NPC waits for the
// daemon that does to take the NPC's slot.
const SlotWait = 5 * time.Second

// NewSlotLocker builds a locker writing under holder (the daemon's name).
// clock must be the scheduler's; nil is the real clock. hold, if not nil,
// ties each slot to the NPC's lease.
func NewSlotLocker(db *gorm.DB, holder string, clock clockwork.Clock, hold HoldFunc) *SlotLocker {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &SlotLocker{db: db, holder: holder, clock: clock, hold: hold}
}

// Run is one scheduled sleep a daemon took: its row of sleep_runs.
type Run struct {
	Job        string `gorm:"primaryKey;size:100"`
	Slot       int64  `gorm:"primaryKey;autoIncrement:false"` // unix seconds of the minute
	Holder     string `gorm:"size:128;not null"`
	StartedAt  int64  `gorm:"not null"` // unix milliseconds
	FinishedAt *int64 // unix milliseconds; nil while running or when it never finished
}

// TableName keeps the table's name stable.
func (Run) TableName() string { return "sleep_runs" }

// Lock takes the current slot of job key, or fails with ErrSlotTaken.
func (l *SlotLocker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	now := l.clock.Now()
	slot := now.Truncate(time.Minute).Unix()
	l.prune(ctx, now)
	release := func() {}
	if id, ok := strings.CutPrefix(key, jobPrefix); ok && l.hold != nil {
		var err error
		if release, err = l.holdFor(ctx, key, id, slot); err != nil {
			return nil, err
		}
	}
	res := l.db.WithContext(ctx).Exec(`INSERT INTO sleep_runs (job, slot, holder, started_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		key, slot, l.holder, now.UnixMilli())
	if res.Error != nil {
		release()
		return nil, fmt.Errorf("sleep: lock %s: %w", key, res.Error)
	}
	if res.RowsAffected == 0 {
		release()
		return nil, ErrSlotTaken
	}
	return &slotLock{l: l, job: key, slot: slot, release: release}, nil
}

// holdFor takes NPC id's lease for the slot's sleep. While another daemon
// holds the NPC it waits for that daemon to take the slot (ErrSlotTaken) or
// for the lease to come free, up to SlotWait; then it leaves the slot to
// the holder.
func (l *SlotLocker) holdFor(ctx context.Context, key, id string, slot int64) (func(), error) {
	deadline := l.clock.Now().Add(SlotWait)
	for {
		release, err := l.hold(ctx, id)
		var busy *lease.BusyError
		if !errors.As(err, &busy) {
			return release, err
		}
		var n int64
		if err := l.db.WithContext(ctx).Raw(`SELECT count(*) FROM sleep_runs WHERE job = ? AND slot = ?`, key, slot).Scan(&n).Error; err != nil {
			return nil, fmt.Errorf("sleep: lock %s: %w", key, err)
		}
		if n > 0 || !l.clock.Now().Before(deadline) {
			return nil, ErrSlotTaken
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.clock.After(100 * time.Millisecond):
		}
	}
}

// prune deletes rows older than RunsKept, at most once an hour.
func (l *SlotLocker) prune(ctx context.Context, now time.Time) {
	l.mu.Lock()
	due := now.Sub(l.lastPrune) >= time.Hour
	if due {
		l.lastPrune = now
	}
	l.mu.Unlock()
	if due {
		l.db.WithContext(ctx).Exec(`DELETE FROM sleep_runs WHERE slot < ?`, now.Add(-RunsKept).Unix())
	}
}

type slotLock struct {
	l       *SlotLocker
	job     string
	slot    int64
	release func()
}

// Unlock records that the run finished and lets the NPC's lease go; the
// row keeps the slot taken.
func (s *slotLock) Unlock(ctx context.Context) error {
	defer s.release()
	err := s.l.db.WithContext(context.WithoutCancel(ctx)).Exec(`UPDATE sleep_runs SET finished_at = ? WHERE job = ? AND slot = ? AND holder = ?`,
		s.l.clock.Now().UnixMilli(), s.job, s.slot, s.l.holder).Error
	if err != nil {
		return fmt.Errorf("sleep: unlock %s: %w", s.job, err)
	}
	return nil
}

// Runs returns the recorded runs of NPC id's scheduled sleep, oldest first.
func Runs(ctx context.Context, db *gorm.DB, id string) ([]Run, error) {
	var out []Run
	if err := db.WithContext(ctx).Where("job = ?", JobName(id)).Order("slot").Find(&out).Error; err != nil {
		return nil, fmt.Errorf("sleep: runs of %q: %w", id, err)
	}
	return out, nil
}

// runsMigration creates sleep_runs.
var runsMigration = store.Migration{
	Component: "sleep", Version: 2, Name: "sleep_runs",
	Up: func(tx *gorm.DB) error { return tx.AutoMigrate(&Run{}) },
}
