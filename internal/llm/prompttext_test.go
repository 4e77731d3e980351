package llm

import "testing"

func TestPromptText(t *testing.T) {
	text := func(role Role, s string) Message {
		return Message{Role: role, Content: []Block{{Type: BlockText, Text: s}}}
	}
	for _, tc := range []struct {
		name string
		req  Request
		want string
	}{
		{"empty", Request{}, ""},
		{"user only", Request{Messages: []Message{text(RoleUser, "hi")}}, "hi"},
		{"system and the last user turn", Request{System: []Block{{Type: BlockText, Text: "be brief"}},
			Messages: []Message{text(RoleUser, "first"), text(RoleAssistant, "ok"), text(RoleUser, "second")}}, "be brief\n\nsecond"},
		{"a last user turn without text is skipped", Request{Messages: []Message{text(RoleUser, "asked"), {Role: RoleUser, Content: []Block{{Type: BlockToolResult}}}}}, "asked"},
		{"system only", Request{Messages: []Message{text(RoleSystem, "rules")}}, "rules"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.req.PromptText(); got != tc.want {
				t.Errorf("(-got +want)\n-%q\n+%q", got, tc.want)
			}
		})
	}
}
