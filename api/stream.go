package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/npcd/npcd/tick"
)

// streamKeepalive is how often an idle action stream writes a comment, so
// proxies and clients see the connection is alive.
const streamKeepalive = 15 * time.Second

// actionStream answers GET /v1/actions/stream: the action feed as
// server-sent events, one event per committed non-idle tick, its id the
// tick's cursor. It reads the feed as a long poll does and ends when the
// client goes or the daemon shuts down.
func (s *Server) actionStream(w http.ResponseWriter, r *http.Request) error {
	q, err := parseQuery(r, "after", "npc", "scope")
	if err != nil {
		return err
	}
	after := q.str("after", "")
	if id := strings.TrimSpace(r.Header.Get("Last-Event-ID")); id != "" {
		after = id // a reconnecting EventSource resumes where it was
	}
	fq, err := feedQuery(q, after)
	if err != nil {
		return err
	}
	// Read once before answering, so a failing store is still an error
	// status, not a stream that ends at once.
	feed, err := s.deps.Engine.Actions(r.Context(), fq)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(w)
	// The stream outlives the server's write timeout, meant for one answer.
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil
	}
	stopped := s.deps.Engine.FeedStopped()
	fq.Wait = streamKeepalive
	for {
		if err := writeTicks(w, feed); err != nil {
			return nil // the client went away
		}
		if len(feed.Ticks) == 0 {
			if _, err := w.Write([]byte(": keepalive\n\n")); err != nil {
				return nil
			}
		}
		if err := rc.Flush(); err != nil {
			return nil
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-stopped:
			return nil
		default:
		}
		fq.After = feed.Cursor
		if feed, err = s.deps.Engine.Actions(r.Context(), fq); err != nil {
			// Headers are sent: the stream ends and the client reconnects
			// from its last event id.
			s.logProblem(r, "", classify(err, ""), err)
			return nil
		}
	}
}

// writeTicks writes a feed page as server-sent events.
func writeTicks(w http.ResponseWriter, feed *tick.Feed) error {
	var b []byte
	for i := range feed.Ticks {
		data, err := json.Marshal(&feed.Ticks[i])
		if err != nil {
			return err
		}
		b = append(b, "id: "...)
		b = strconv.AppendInt(b, feed.Ticks[i].Cursor, 10)
		b = append(b, "\nevent: tick\ndata: "...)
		b = append(b, data...)
		b = append(b, "\n\n"...)
	}
	if len(b) == 0 {
		return nil
	}
	_, err := w.Write(b)
	return err
}
