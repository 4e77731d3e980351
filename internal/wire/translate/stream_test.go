package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"testing/synctest"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

// streamTool is one tool call of a canonical stream.
type streamTool struct {
	id, upstreamName, clientName, input string
}

// streamCase is a canonical answer stream as an upstream sends it.
type streamCase struct {
	name  string
	text  []string // text deltas of the first block
	tools []streamTool
	stop  llm.StopReason
	seq   string
	usage llm.Usage
}

var streamCases = []streamCase{
	{
		name: "parallel_tools",
		text: []string{"Let", " me", " check", " both", "."},
		tools: []streamTool{
			{"toolu_a", "weather_get_b8affdae", "weather.get", `{"city": "Paris", "days": [1, 2, 3], "units": "metric"}`},
			{"toolu_b", "get_time", "get_time", `{"tz": "Europe/Oslo", "format": "24h"}`},
		},
		stop:  llm.StopToolUse,
		usage: llm.Usage{InputTokens: 25, OutputTokens: 40, CacheReadTokens: 100, CacheWriteTokens: 7},
	},
	{
		name:  "text_max_tokens",
		text:  []string{"Once", " upon", " a", " time"},
		stop:  llm.StopMaxTokens,
		usage: llm.Usage{InputTokens: 5, OutputTokens: 4},
	},
	{
		name:  "text_stop_sequence",
		text:  []string{"One", ",", " two"},
		stop:  llm.StopSequence,
		seq:   ", three",
		usage: llm.Usage{InputTokens: 5, OutputTokens: 3},
	},
}

// events builds the canonical stream: a text block, then every tool block
// opened before any argument arrives, their argument fragments (3 bytes
// each) interleaved round-robin, and the blocks closed in order.
func (c streamCase) events() []*llm.Event {
	evs := []*llm.Event{{Type: llm.EventMessageStart, Message: &llm.Response{ID: "msg_up", Model: "up-model", Created: 1767225600,
		Usage: llm.Usage{InputTokens: c.usage.InputTokens, CacheReadTokens: c.usage.CacheReadTokens, CacheWriteTokens: c.usage.CacheWriteTokens}}}}
	evs = append(evs, &llm.Event{Type: llm.EventBlockStart, Index: 0, Block: &llm.Block{Type: llm.BlockText}})
	for _, d := range c.text {
		evs = append(evs, &llm.Event{Type: llm.EventBlockDelta, Index: 0, DeltaType: llm.DeltaText, Delta: d})
	}
	evs = append(evs, &llm.Event{Type: llm.EventBlockStop, Index: 0})
	frags := make([][]string, len(c.tools))
	for i, tl := range c.tools {
		evs = append(evs, &llm.Event{Type: llm.EventBlockStart, Index: i + 1, Block: &llm.Block{Type: llm.BlockToolUse, ID: tl.id, Name: tl.upstreamName, Input: json.RawMessage("{}")}})
		for s := tl.input; s != ""; {
			n := min(3, len(s))
			frags[i] = append(frags[i], s[:n])
			s = s[n:]
		}
	}
	for more := true; more; {
		more = false
		for i := range frags {
			if len(frags[i]) > 0 {
				evs = append(evs, &llm.Event{Type: llm.EventBlockDelta, Index: i + 1, DeltaType: llm.DeltaInputJSON, Delta: frags[i][0]})
				frags[i] = frags[i][1:]
				more = true
			}
		}
	}
	for i := range c.tools {
		evs = append(evs, &llm.Event{Type: llm.EventBlockStop, Index: i + 1})
	}
	u := c.usage
	evs = append(evs, &llm.Event{Type: llm.EventMessageDelta, StopReason: c.stop, StopSequence: c.seq, Usage: &u})
	return append(evs, &llm.Event{Type: llm.EventMessageStop})
}

// report is the Report of a client request naming the case's tools.
func (c streamCase) report(t *testing.T, client llm.Format) Report {
	t.Helper()
	req := &llm.Request{Format: client, Model: "m", MaxTokens: 100, HasMaxTokens: true,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "Go"}}}}}
	for _, tl := range c.tools {
		req.Tools = append(req.Tools, llm.Tool{Name: tl.clientName, InputSchema: json.RawMessage(`{"type":"object"}`)})
	}
	_, rep, err := Prepare(req, otherFormat(client), Policy{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range c.tools {
		if rep.RestoreName(tl.upstreamName) != tl.clientName {
			t.Fatalf("report maps %q to %q, want %q", tl.upstreamName, rep.RestoreName(tl.upstreamName), tl.clientName)
		}
	}
	return rep
}

// relay writes evs in the upstream format, reads them back with that
// format's reader, restores them with rep and writes them in the client's
// format: what the mesh does with a translated stream.
func relay(t *testing.T, evs []*llm.Event, upstream llm.Format, rep Report, clientIncludeUsage bool) []byte {
	t.Helper()
	var up bytes.Buffer
	var write func(*llm.Event) error
	if upstream == llm.FormatAnthropic {
		write = anthropic.NewStreamWriter(sse.NewWriter(&up, nil), anthropic.StreamOptions{}).Write
	} else {
		// the provider always asks an OpenAI upstream for the usage chunk
		write = openai.NewStreamWriter(sse.NewWriter(&up, nil), openai.StreamOptions{IncludeUsage: true}).Write
	}
	for _, ev := range evs {
		if err := write(ev); err != nil {
			t.Fatalf("upstream writer: %v", err)
		}
	}
	var next func() (*llm.Event, error)
	var out bytes.Buffer
	if upstream == llm.FormatAnthropic {
		next = anthropic.NewStreamReader(&up).Next
		write = openai.NewStreamWriter(sse.NewWriter(&out, nil), openai.StreamOptions{IncludeUsage: clientIncludeUsage}).Write
	} else {
		next = openai.NewStreamReader(&up).Next
		write = anthropic.NewStreamWriter(sse.NewWriter(&out, nil), anthropic.StreamOptions{}).Write
	}
	for {
		ev, err := next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("upstream reader: %v", err)
		}
		if err := write(rep.RestoreEvent(ev)); err != nil {
			t.Fatalf("client writer: %v", err)
		}
	}
	return out.Bytes()
}

// TestStreamGolden relays each canonical stream through each upstream format
// to a client of the other and compares the client's bytes with
// testdata/streams/<dir>_<name>.sse. The sdkcompat package decodes those
// files with the client's official SDK (anthropic-sdk-go Message.Accumulate,
// openai-go ChatCompletionAccumulator), which must reassemble exactly the
// text, the tool calls (ids, restored names, inputs), the stop reason and
// the usage; it is a package of its own so that FuzzPrepare's build does not
// instrument the SDKs.
func TestStreamGolden(t *testing.T) {
	for _, c := range streamCases {
		for _, upstream := range []llm.Format{llm.FormatAnthropic, llm.FormatOpenAI} {
			dir := "a2o"
			if upstream == llm.FormatOpenAI {
				dir = "o2a"
			}
			t.Run(dir+"_"+c.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { // fixed clock: the OpenAI writer stamps created
					client := otherFormat(upstream)
					out := relay(t, c.events(), upstream, c.report(t, client), true)
					checkGolden(t, filepath.Join("testdata", "streams", dir+"_"+c.name+".sse"), out)
				})
			})
		}
	}
}

// TestRestoreEvent checks what RestoreEvent changes and that it never
// modifies its argument.
func TestRestoreEvent(t *testing.T) {
	rep := Report{client: llm.FormatOpenAI, upstream: llm.FormatAnthropic,
		names: map[string]string{"n_1": "n.1"}, ids: map[string]string{"id_1": "id:1"}}
	for _, tc := range []struct {
		name string
		in   llm.Event
		want llm.Event
	}{
		{"tool start renamed", llm.Event{Type: llm.EventBlockStart, Index: 1, Block: &llm.Block{Type: llm.BlockToolUse, ID: "id_1", Name: "n_1"}, Raw: []byte("x"), RawFormat: llm.FormatAnthropic},
			llm.Event{Type: llm.EventBlockStart, Index: 1, Block: &llm.Block{Type: llm.BlockToolUse, ID: "id:1", Name: "n.1"}}},
		{"other tool untouched", llm.Event{Type: llm.EventBlockStart, Block: &llm.Block{Type: llm.BlockToolUse, ID: "x", Name: "y"}, Raw: []byte("x")},
			llm.Event{Type: llm.EventBlockStart, Block: &llm.Block{Type: llm.BlockToolUse, ID: "x", Name: "y"}, Raw: []byte("x")}},
		{"usage extra stripped", llm.Event{Type: llm.EventMessageDelta, StopReason: llm.StopEndTurn, Usage: &llm.Usage{OutputTokens: 3, Extra: llm.Extra{"service_tier": json.RawMessage(`"standard"`)}}},
			llm.Event{Type: llm.EventMessageDelta, StopReason: llm.StopEndTurn, Usage: &llm.Usage{OutputTokens: 3}}},
		{"unknown stop", llm.Event{Type: llm.EventMessageDelta, StopReason: "eos"},
			llm.Event{Type: llm.EventMessageDelta, StopReason: llm.StopEndTurn}},
		{"message start extras", llm.Event{Type: llm.EventMessageStart, Message: &llm.Response{ID: "a", Extra: llm.Extra{"container": json.RawMessage(`{}`)}, Usage: llm.Usage{InputTokens: 2, Extra: llm.Extra{"service_tier": json.RawMessage(`"x"`)}}}},
			llm.Event{Type: llm.EventMessageStart, Message: &llm.Response{ID: "a", Usage: llm.Usage{InputTokens: 2}}}},
		{"text delta untouched", llm.Event{Type: llm.EventBlockDelta, DeltaType: llm.DeltaText, Delta: "hi", Raw: []byte("r")},
			llm.Event{Type: llm.EventBlockDelta, DeltaType: llm.DeltaText, Delta: "hi", Raw: []byte("r")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			before := dump(&in)
			got := rep.RestoreEvent(&in)
			if after := dump(&in); after != before {
				t.Fatalf("RestoreEvent modified its input (-got +want):\n%s", diffLines(after, before))
			}
			if g, w := dump(got), dump(&tc.want); g != w {
				t.Errorf("(-got +want):\n%s", diffLines(g, w))
			}
		})
	}
	var same Report
	ev := &llm.Event{Type: llm.EventMessageDelta, StopReason: "eos"}
	if same.RestoreEvent(ev) != ev {
		t.Error("a zero Report changed an event")
	}
}
