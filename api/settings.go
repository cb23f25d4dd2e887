package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// settingsIn is the body of PUT /v1/npcs/{npc} as read: tools may be bare
// names ("say", "look") as well as objects, as in scenario files.
type settingsIn struct {
	NPCSettings
	// Tools shadows NPCSettings.Tools; nil (absent or null) means the
	// default tools, an empty list none.
	Tools []json.RawMessage `json:"tools"`
}

// readSettings reads NPC settings, each tool a name or an object.
func (s *Server) readSettings(w http.ResponseWriter, r *http.Request) (NPCSettings, error) {
	body, err := s.readBody(w, r)
	if err != nil {
		return NPCSettings{}, err
	}
	return decodeSettings(body)
}

// decodeSettings decodes NPC settings, each tool a name or an object.
func decodeSettings(body []byte) (NPCSettings, error) {
	var in settingsIn
	if err := decodeStrict(body, &in, true); err != nil {
		return NPCSettings{}, err
	}
	out := in.NPCSettings
	if in.Tools == nil {
		return out, nil
	}
	out.Tools = make([]Tool, len(in.Tools))
	for i, raw := range in.Tools {
		t, err := toolOf(raw)
		if err != nil {
			var re *requestError
			if errors.As(err, &re) {
				field := fmt.Sprintf("tools[%d]", i)
				if re.Field != "" && re.Field != "body" {
					field += "." + re.Field
				}
				return NPCSettings{}, &requestError{Field: field, Message: re.Message, Err: re.Err}
			}
			return NPCSettings{}, err
		}
		out.Tools[i] = t
	}
	return out, nil
}

// toolOf reads one tool: a JSON string is a tool's bare name, an object a
// whole declaration.
func toolOf(raw json.RawMessage) (Tool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var name string
		if err := json.Unmarshal(raw, &name); err != nil {
			return Tool{}, badRequest("", "is not a valid JSON string")
		}
		return Tool{Name: name}, nil
	}
	if len(raw) == 0 || raw[0] != '{' {
		return Tool{}, badRequest("", "must be a tool's name or an object {name, description, parameters, returns}")
	}
	var t Tool
	if err := decodeStrict(raw, &t, true); err != nil {
		return Tool{}, err
	}
	return t, nil
}

// mergePatch applies a JSON merge patch (RFC 7386) to doc: members of the
// patch replace those of doc, objects merge member by member, and null
// removes a member (the setting goes back to its default).
func mergePatch(doc, patch map[string]any) map[string]any {
	if doc == nil {
		doc = map[string]any{}
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(doc, k)
		case map[string]any:
			dv, _ := doc[k].(map[string]any)
			doc[k] = mergePatch(dv, pv)
		default:
			doc[k] = v
		}
	}
	return doc
}

// patchedSettings is what PATCH /v1/npcs/{npc} stores: the NPC's current
// settings with the merge patch body applied, read as a PUT body is.
func patchedSettings(current NPCSettings, body []byte) (NPCSettings, error) {
	var patch map[string]any
	if err := decodeStrict(body, &patch, true); err != nil {
		return NPCSettings{}, err
	}
	raw, err := json.Marshal(current)
	if err != nil {
		return NPCSettings{}, err
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return NPCSettings{}, err
	}
	merged, err := json.Marshal(mergePatch(doc, patch))
	if err != nil {
		return NPCSettings{}, err
	}
	return decodeSettings(merged)
}
