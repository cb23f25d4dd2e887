package tick

import (
	"context"
	"testing"
	"unsafe"
)

// A call's id and arguments, as the live history holds them between
// ticks, are one string: one object a call for the collector, not two.
func TestHeldCallsKeepIDAndArgumentsInOneString(t *testing.T) {
	env := newEnv(t)
	if _, err := env.eng.PutNPC(context.Background(), brom()); err != nil {
		t.Fatal(err)
	}
	tickOnce(t, env, "Have you seen my sword?")
	env.eng.history.mu.Lock()
	en := env.eng.history.npcs["brom"]
	env.eng.history.mu.Unlock()
	if en == nil {
		t.Fatal("no live history held after a tick")
	}
	calls := 0
	for _, m := range en.msgs {
		for _, tc := range m.ToolCalls.V {
			calls++
			if tc.ID == "" || tc.Args == "" {
				t.Fatalf("call %+v: an id or arguments missing", tc)
			}
			if unsafe.StringData(tc.Args) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.StringData(tc.ID)), len(tc.ID))) {
				t.Errorf("call %s: its arguments are a string apart from its id", tc.ID)
			}
		}
	}
	if calls == 0 {
		t.Fatal("the tick made no call: the test checks nothing")
	}
}
