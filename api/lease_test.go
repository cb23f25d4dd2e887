package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/npcd/npcd/lease"
)

// An NPC another daemon holds: a batch of every pending NPC lists it as
// npc_busy at once, since the daemon holding it ticks it. A listed NPC
// would wait for the lease (here an hour, so a batch that waited would not
// answer within the test's time limit).
func TestBatchOfPendingReportsNPCsHeldElsewhereBusy(t *testing.T) {
	var db *gorm.DB
	e := newEnv(t, envOpts{leases: func(d *gorm.DB) *lease.Manager {
		db = d
		m, err := lease.New(d, lease.Config{Holder: "here", TTL: 300 * time.Millisecond, Wait: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}})
	e.put("brom", bromSettings())
	e.put("mara", bromSettings())
	e.say("brom", "e1", "Is the forge hot?")
	e.say("mara", "e2", "Good morning.")
	// This daemon's leases are not renewed (its manager is not started),
	// so the other daemon takes brom once the registration's lease ends.
	other, err := lease.New(db, lease.Config{Holder: "elsewhere", Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	release, _, err := other.Hold(context.Background(), "brom")
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	r := e.do("POST", "/v1/tick", `{}`)
	var res BatchTickResponse
	if err := json.Unmarshal(r.body, &res); r.status != http.StatusOK || err != nil {
		t.Fatalf("batch of every pending NPC: %d %s (%v)", r.status, r.body, err)
	}
	if len(res.Results) != 1 || res.Results[0].NPC != "mara" {
		t.Errorf("results %+v, want mara's tick", res.Results)
	}
	if len(res.Errors) != 1 || res.Errors[0].NPC != "brom" || res.Errors[0].Code != CodeNPCBusy {
		t.Errorf("errors %+v, want brom busy", res.Errors)
	}
}
