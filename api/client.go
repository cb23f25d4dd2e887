package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/npcd/npcd/internal/text"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/npcd/npcd/character"
	"github.com/npcd/npcd/journal"
	"github.com/npcd/npcd/sleep"
	"github.com/npcd/npcd/tick"
)

// DefaultClientTimeout bounds one call of a Client built without an
// http.Client; it is above the engine's default tick timeout (2m).
const DefaultClientTimeout = 3 * time.Minute

// maxResponseBytes bounds a response body the client reads.
const maxResponseBytes = 64 << 20

// Client calls an npcd daemon over HTTP. It is safe for concurrent use.
// Responses are decoded leniently: fields the server adds later are
// ignored.
type Client struct {
	base  string
	token string
	hc    *http.Client
}

// NewClient returns a client of the daemon at baseURL (e.g.
// "http://127.0.0.1:8740"), sending token as the bearer token when it is
// not empty. A nil hc uses an http.Client with DefaultClientTimeout.
func NewClient(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: DefaultClientTimeout}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: hc}
}

// APIError is an error response of the daemon.
type APIError struct {
	Status  int
	Code    string // e.g. "not_found"; empty when the body was not an npcd error
	Message string
	// RetryAfter is the wait the daemon asked for (429, 503), or zero.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("npcd: HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("npcd: HTTP %d %s: %s", e.Status, e.Code, e.Message)
}

// Health returns nil when the daemon answers /healthz.
func (c *Client) Health(ctx context.Context) error {
	var out Health
	_, err := c.do(ctx, http.MethodGet, "/healthz", nil, nil, &out)
	return err
}

// PutNPC creates NPC id or replaces its settings, and reports whether it was
// created.
func (c *Client) PutNPC(ctx context.Context, id string, settings NPCSettings) (npc *NPC, created bool, err error) {
	npc = new(NPC)
	status, err := c.do(ctx, http.MethodPut, npcPath(id, ""), nil, settings, npc)
	if err != nil {
		return nil, false, err
	}
	return npc, status == http.StatusCreated, nil
}

// CreateNPC creates NPC id only if it does not exist. An existing NPC is
// left unchanged and the error is an *APIError with status 412 and code
// "exists".
func (c *Client) CreateNPC(ctx context.Context, id string, settings NPCSettings) (*NPC, error) {
	npc := new(NPC)
	if _, err := c.doWith(ctx, http.MethodPut, npcPath(id, ""), nil, http.Header{"If-None-Match": {"*"}}, settings, npc); err != nil {
		return nil, err
	}
	return npc, nil
}

// GetNPC returns NPC id.
func (c *Client) GetNPC(ctx context.Context, id string) (*NPC, error) {
	npc := new(NPC)
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, ""), nil, nil, npc); err != nil {
		return nil, err
	}
	return npc, nil
}

// PatchNPC changes single settings of NPC id: patch is a JSON merge patch
// of NPCSettings (a map or a struct marshalling only the fields to change).
func (c *Client) PatchNPC(ctx context.Context, id string, patch any) (*NPC, error) {
	npc := new(NPC)
	if _, err := c.do(ctx, http.MethodPatch, npcPath(id, ""), nil, patch, npc); err != nil {
		return nil, err
	}
	return npc, nil
}

// ListNPCs returns every NPC ordered by id.
func (c *Client) ListNPCs(ctx context.Context) ([]NPC, error) {
	var out NPCList
	if _, err := c.do(ctx, http.MethodGet, "/v1/npcs", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.NPCs, nil
}

// DeleteNPC deletes NPC id and everything stored about it.
func (c *Client) DeleteNPC(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, npcPath(id, ""), nil, nil, nil)
	return err
}

// PostEvents posts what NPC id perceives.
func (c *Client) PostEvents(ctx context.Context, id string, events []Event) (EventsAccepted, error) {
	var out EventsAccepted
	_, err := c.do(ctx, http.MethodPost, npcPath(id, "/events"), nil, EventsRequest{Events: events}, &out)
	return out, err
}

// Tick runs one tick of NPC id.
func (c *Client) Tick(ctx context.Context, id string) (*TickResult, error) {
	return c.TickWithKey(ctx, id, "")
}

// TickWithKey runs one tick of NPC id under an idempotency key: calling it
// again with the same key (after a timeout, or from a restarted game)
// returns the stored answer and ticks nothing. An empty key is Tick.
func (c *Client) TickWithKey(ctx context.Context, id, key string) (*TickResult, error) {
	res := new(TickResult)
	if _, err := c.doWith(ctx, http.MethodPost, npcPath(id, "/tick"), nil, keyHeader(key), nil, res); err != nil {
		return nil, err
	}
	return res, nil
}

// TickWithEvents posts events for NPC id and runs its tick, in one
// request, under key when not empty: a world's round for one NPC. It
// returns the tick and what became of the events. When the events are
// refused, the error is the refusal and nothing ticked; with event ids and
// a key, a retry stores nothing twice and returns the stored tick.
func (c *Client) TickWithEvents(ctx context.Context, id, key string, events []Event) (*TickResult, EventsAccepted, error) {
	res := new(TickResult)
	_, h, err := c.exchange(ctx, http.MethodPost, npcPath(id, "/tick"), nil, keyHeader(key), EventsRequest{Events: events}, res)
	if err != nil {
		return nil, EventsAccepted{}, err
	}
	var got EventsAccepted
	got.Accepted, _ = strconv.Atoi(h.Get(HeaderEventsAccepted))
	got.Duplicates, _ = strconv.Atoi(h.Get(HeaderEventsDuplicates))
	return res, got, nil
}

// keyHeader carries a tick's idempotency key; nil for none.
func keyHeader(key string) http.Header {
	if key == "" {
		return nil
	}
	return http.Header{"Idempotency-Key": {key}}
}

// GetTick returns what NPC id's committed tick n answered.
func (c *Client) GetTick(ctx context.Context, id string, n int64) (*TickResult, error) {
	res := new(TickResult)
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, "/ticks/"+strconv.FormatInt(n, 10)), nil, nil, res); err != nil {
		return nil, err
	}
	return res, nil
}

// Actions reads the action feed after cursor after, waiting up to wait
// for a tick when there is none (zero: answer at once); limit 0 is the
// server's default, and npcs, when given, limits the feed to them. Pass
// the returned Feed's Cursor as after next time.
func (c *Client) Actions(ctx context.Context, after int64, limit int, wait time.Duration, npcs ...string) (*Feed, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	if len(npcs) > 0 {
		q.Set("npc", strings.Join(npcs, ","))
	}
	out := new(Feed)
	if _, err := c.do(ctx, http.MethodGet, "/v1/actions", q, nil, out); err != nil {
		return nil, err
	}
	return out, nil
}

// TickMany ticks the given NPCs in parallel; with none, every NPC with
// pending events or posted tool results.
func (c *Client) TickMany(ctx context.Context, ids []string) (*BatchTickResponse, error) {
	return c.TickBatch(ctx, BatchTickRequest{NPCs: ids})
}

// TickBatch sends a batch tick as req states it: its NPCs, their
// idempotency keys, and events to post for them before they tick.
func (c *Client) TickBatch(ctx context.Context, req BatchTickRequest) (*BatchTickResponse, error) {
	out := new(BatchTickResponse)
	if _, err := c.do(ctx, http.MethodPost, "/v1/tick", nil, req, out); err != nil {
		return nil, err
	}
	return out, nil
}

// PostToolResults posts the game's results of returns:true calls of NPC id.
func (c *Client) PostToolResults(ctx context.Context, id string, results []ToolResult) error {
	var out ToolResultsAccepted
	_, err := c.do(ctx, http.MethodPost, npcPath(id, "/tool-results"), nil, ToolResultsRequest{Results: results}, &out)
	return err
}

// Compact compacts NPC id's context now, honouring an optional
// instruction. It returns nil when there was nothing to compact.
func (c *Client) Compact(ctx context.Context, id, instruction string) (*tick.Compaction, error) {
	var out CompactResponse
	if _, err := c.do(ctx, http.MethodPost, npcPath(id, "/compact"), nil, CompactRequest{Instruction: instruction}, &out); err != nil {
		return nil, err
	}
	return out.Compaction, nil
}

// ClearContext archives every live message of NPC id.
func (c *Client) ClearContext(ctx context.Context, id string) error {
	_, err := c.do(ctx, http.MethodDelete, npcPath(id, "/context"), nil, nil, nil)
	return err
}

// HistoryQuery selects messages for Client.History; zero fields are left
// to the server's defaults (every state, every turn, the newest 100).
type HistoryQuery struct {
	State  string // live, archived or all
	Turn   int64
	Limit  int
	Before int64
}

// History returns NPC id's messages, oldest first.
func (c *Client) History(ctx context.Context, id string, hq HistoryQuery) ([]Message, error) {
	out, err := c.HistoryPage(ctx, id, hq)
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// HistoryPage returns one page of NPC id's messages, oldest first, with
// the before of the older page and the compactions its messages refer to.
func (c *Client) HistoryPage(ctx context.Context, id string, hq HistoryQuery) (*HistoryResponse, error) {
	q := url.Values{}
	if hq.State != "" {
		q.Set("state", hq.State)
	}
	if hq.Turn != 0 {
		q.Set("turn", strconv.FormatInt(hq.Turn, 10))
	}
	setPaging(q, hq.Limit, hq.Before)
	out := new(HistoryResponse)
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, "/history"), q, nil, out); err != nil {
		return nil, err
	}
	return out, nil
}

// JournalQuery selects entries for Client.Journal; zero fields are left to
// the server's defaults (every type, the newest 100).
type JournalQuery struct {
	Type   string
	Limit  int
	Before int64
}

// Journal returns NPC id's journal entries, oldest first.
func (c *Client) Journal(ctx context.Context, id string, jq JournalQuery) ([]journal.Entry, error) {
	out, err := c.JournalPage(ctx, id, jq)
	if err != nil {
		return nil, err
	}
	return out.Entries, nil
}

// JournalPage returns one page of NPC id's journal entries, oldest first,
// with the before of the older page.
func (c *Client) JournalPage(ctx context.Context, id string, jq JournalQuery) (*JournalResponse, error) {
	q := url.Values{}
	if jq.Type != "" {
		q.Set("type", jq.Type)
	}
	setPaging(q, jq.Limit, jq.Before)
	out := new(JournalResponse)
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, "/journal"), q, nil, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Profiles returns what NPC id knows about each entity.
func (c *Client) Profiles(ctx context.Context, id string) ([]character.Profile, error) {
	var out ProfilesResponse
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, "/profiles"), nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Profiles, nil
}

// Sleep runs a sleep of the NPC now (game-driven bedtime).
func (c *Client) Sleep(ctx context.Context, id string) (*sleep.Report, error) {
	var out sleep.Report
	if _, err := c.do(ctx, http.MethodPost, npcPath(id, "/sleep"), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Compactions lists an NPC's compactions, oldest first.
func (c *Client) Compactions(ctx context.Context, id string) ([]sleep.Record, error) {
	out, err := c.CompactionsPage(ctx, id, 0, 0)
	if err != nil {
		return nil, err
	}
	return out.Compactions, nil
}

// CompactionsPage lists the newest limit compactions of NPC id older than
// before (0: no bound; a zero limit lists them all), oldest first, with the
// before of the older page.
func (c *Client) CompactionsPage(ctx context.Context, id string, limit int, before int64) (*CompactionsResponse, error) {
	q := url.Values{}
	setPaging(q, limit, before)
	out := new(CompactionsResponse)
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, "/compactions"), q, nil, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Overview returns NPC id at a glance.
func (c *Client) Overview(ctx context.Context, id string) (*Overview, error) {
	out := new(Overview)
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, "/overview"), nil, nil, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Memory searches what NPC id remembers for query and returns up to k
// results (0: the server's default), best first.
func (c *Client) Memory(ctx context.Context, id, query string, k int) ([]MemoryResult, error) {
	q := url.Values{"q": {query}}
	if k != 0 {
		q.Set("k", strconv.Itoa(k))
	}
	var out MemoryResponse
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, "/memory"), q, nil, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// Message returns one message of NPC id in full.
func (c *Client) Message(ctx context.Context, id string, msgID int64) (*MessageDetail, error) {
	out := new(MessageDetail)
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, "/messages/"+strconv.FormatInt(msgID, 10)), nil, nil, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Entry returns one journal entry of NPC id.
func (c *Client) Entry(ctx context.Context, id string, entryID int64) (*journal.Entry, error) {
	var out EntryDetail
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, "/journal/"+strconv.FormatInt(entryID, 10)), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Entry, nil
}

// MemoryByID returns one long-term memory of NPC id.
func (c *Client) MemoryByID(ctx context.Context, id string, memID int64) (*Memory, error) {
	var out MemoryDetail
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, "/memories/"+strconv.FormatInt(memID, 10)), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out.Memory, nil
}

// Diff returns the "what did we lose" report of compaction compID of NPC id.
func (c *Client) Diff(ctx context.Context, id string, compID int64) (*DiffResponse, error) {
	out := new(DiffResponse)
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, "/compactions/"+strconv.FormatInt(compID, 10)+"/diff"), nil, nil, out); err != nil {
		return nil, err
	}
	return out, nil
}

// AsOf returns NPC id's context as it was at the end of tick.
func (c *Client) AsOf(ctx context.Context, id string, tick int64) (*AsOfResponse, error) {
	out := new(AsOfResponse)
	q := url.Values{"tick": {strconv.FormatInt(tick, 10)}}
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, "/as-of"), q, nil, out); err != nil {
		return nil, err
	}
	return out, nil
}

// TimelineQuery selects the ticks of Client.Timeline; zero fields are left
// to the server (every tick, the newest 10000).
type TimelineQuery struct {
	From, To int64
	Limit    int
}

// Timeline returns NPC id's context utilization over ticks with its
// compactions.
func (c *Client) Timeline(ctx context.Context, id string, tq TimelineQuery) (*TimelineResponse, error) {
	q := url.Values{}
	if tq.From != 0 {
		q.Set("from", strconv.FormatInt(tq.From, 10))
	}
	if tq.To != 0 {
		q.Set("to", strconv.FormatInt(tq.To, 10))
	}
	if tq.Limit != 0 {
		q.Set("limit", strconv.Itoa(tq.Limit))
	}
	out := new(TimelineResponse)
	if _, err := c.do(ctx, http.MethodGet, npcPath(id, "/timeline"), q, nil, out); err != nil {
		return nil, err
	}
	return out, nil
}

func setPaging(q url.Values, limit int, before int64) {
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if before != 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
}

func npcPath(id, rest string) string { return "/v1/npcs/" + url.PathEscape(id) + rest }

// do sends one request with in as its JSON body (none when nil) and decodes
// a 2xx body into out (ignored when nil). It returns the status, or an
// *APIError for any other status.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, in, out any) (int, error) {
	return c.doWith(ctx, method, path, q, nil, in, out)
}

// doWith is do with extra request headers.
func (c *Client) doWith(ctx context.Context, method, path string, q url.Values, hdr http.Header, in, out any) (int, error) {
	status, _, err := c.exchange(ctx, method, path, q, hdr, in, out)
	return status, err
}

// exchange is doWith that returns the response's headers too (nil when
// there was no response).
func (c *Client) exchange(ctx context.Context, method, path string, q url.Values, hdr http.Header, in, out any) (int, http.Header, error) {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return 0, nil, fmt.Errorf("npcd: encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return 0, nil, fmt.Errorf("npcd: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, vs := range hdr {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("npcd: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return resp.StatusCode, resp.Header, fmt.Errorf("npcd: %s %s: read response: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, resp.Header, apiError(resp, raw)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return resp.StatusCode, resp.Header, nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return resp.StatusCode, resp.Header, fmt.Errorf("npcd: %s %s: decode response: %w", method, path, err)
	}
	return resp.StatusCode, resp.Header, nil
}

func apiError(resp *http.Response, raw []byte) *APIError {
	e := &APIError{Status: resp.StatusCode}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	var body ErrorBody
	if err := json.Unmarshal(raw, &body); err == nil && body.Error.Code != "" {
		e.Code, e.Message = body.Error.Code, body.Error.Message
		return e
	}
	// Not an npcd error body (a proxy's page, say): keep a little of it.
	e.Message = strings.TrimSpace(text.Clip(string(raw), 200))
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}
