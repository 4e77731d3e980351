package fragment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/structured"
)

// fakeReplicas is the attempt path below the stage: width candidates, each
// replica answering by answer(fragment number, candidate it started on).
type fakeReplicas struct {
	width  int
	answer func(part, cand int) (string, error)
	merge  string

	mu      sync.Mutex
	starts  map[int][]int // fragment number → candidates its replicas started on
	won     map[int]int   // fragment number → the candidate of its winning replica
	merges  int
	eps     []*provider.Endpoint
	replies []*fakeReplica
}

func newFakeReplicas(width int, answer func(part, cand int) (string, error)) *fakeReplicas {
	f := &fakeReplicas{width: width, answer: answer, starts: map[int][]int{}, won: map[int]int{}}
	for i := range width {
		f.eps = append(f.eps, &provider.Endpoint{ID: fmt.Sprintf("ep%d", i), UpstreamModel: "m"})
	}
	return f
}

var partRe = regexp.MustCompile(`^\[Part (\d+) of \d+ of a longer input\]`)

func (f *fakeReplicas) Width() int { return f.width }

func (f *fakeReplicas) Replica(req *llm.Request, used []bool) Replica {
	m := partRe.FindStringSubmatch(req.Messages[len(req.Messages)-1].Text())
	var part int
	fmt.Sscan(m[1], &part)
	cand := -1
	for i, u := range used {
		if !u {
			cand, used[i] = i, true
			break
		}
	}
	f.mu.Lock()
	f.starts[part] = append(f.starts[part], cand)
	f.mu.Unlock()
	r := &fakeReplica{f: f, part: part, cand: cand}
	f.replies = append(f.replies, r)
	return r
}

func (f *fakeReplicas) Merge(_ context.Context, req *llm.Request) *llm.Response {
	f.merges++
	if f.merge == "" {
		return nil
	}
	return &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: f.merge}}, Usage: llm.Usage{InputTokens: 100, OutputTokens: 10}}
}

type fakeReplica struct {
	f          *fakeReplicas
	part, cand int
	ok         bool
}

func (r *fakeReplica) Run(context.Context) (*llm.Response, error) {
	text, err := r.f.answer(r.part, r.cand)
	if err != nil {
		return nil, err
	}
	r.ok = true
	return &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: text}}, Usage: llm.Usage{InputTokens: 10, OutputTokens: 2}}, nil
}

func (r *fakeReplica) Endpoints() []string { return []string{fmt.Sprintf("ep%d", r.cand)} }

func (r *fakeReplica) Served() *provider.Endpoint {
	if !r.ok {
		return nil
	}
	return r.f.eps[r.cand]
}

func (r *fakeReplica) Won() {
	r.f.mu.Lock()
	r.f.won[r.part] = r.cand
	r.f.mu.Unlock()
}

// document is n paragraphs of about 60 tokens each.
func document(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "Section %d. ", i+1)
		for range 20 {
			b.WriteString("The quarterly report lists sales. ")
		}
	}
	return b.String()
}

type stageRun struct {
	eligible bool
	spec     *structured.Spec
	mayFail  bool
	stream   bool
	fragment *bool
	part     *Part
	failed   error
	nextRan  bool
}

func (s *stageRun) serve(t *testing.T, cfg Config, rep Replicas, doc string) (*pipeline.Answer, error) {
	t.Helper()
	next := pipeline.HandlerFunc(func(context.Context, *pipeline.Call) (*pipeline.Answer, error) {
		s.nextRan = true
		return &pipeline.Answer{Response: &llm.Response{ID: "plain"}}, nil
	})
	h := pipeline.Chain(next, NewStage(cfg, Hooks{
		Record:   func(_ *pipeline.Call, p *Part) { s.part = p },
		Eligible: func(*pipeline.Call) bool { return s.eligible },
		Contract: func(*pipeline.Call) (*structured.Spec, bool) { return s.spec, s.mayFail },
		Replicas: func(*pipeline.Call) Replicas { return rep },
		Fail: func(_ context.Context, _ *pipeline.Call, err error) error {
			s.failed = err
			return fmt.Errorf("mapped: %w", err)
		},
	}))
	c := &pipeline.Call{ID: "r1", Request: &llm.Request{Stream: s.stream, Messages: []llm.Message{
		{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: doc}}}}}}
	if s.fragment != nil {
		c.Behavior = &pipeline.Behavior{Fragment: s.fragment}
	}
	return h.Serve(context.Background(), c)
}

var yes = func() *bool { b := true; return &b }()

func TestStageFansOutAndFuses(t *testing.T) {
	rep := newFakeReplicas(3, func(part, cand int) (string, error) { return fmt.Sprintf("Answer %d.", part), nil })
	s := &stageRun{eligible: true}
	ans, err := s.serve(t, Config{ThresholdTokens: 100, TargetTokens: 200}, rep, document(5))
	if err != nil {
		t.Fatal(err)
	}
	if s.nextRan {
		t.Fatal("next ran for a fragmented call")
	}
	p := s.part
	if p == nil || p.Fragments < 2 || p.FragmentsOK != p.Fragments || len(p.Details) != p.Fragments {
		t.Fatalf("part %+v", p)
	}
	for i := 1; i <= p.Fragments; i++ {
		rep.assertFragment(t, i, ans.Response.Text())
	}
	if in, out := 10*2*p.Fragments, 2*2*p.Fragments; p.Usage.InputTokens != in || p.Usage.OutputTokens != out || ans.Response.Usage.InputTokens != in || ans.Response.Usage.OutputTokens != out {
		t.Errorf("usage %+v (answer %+v), want %d in, %d out", p.Usage, ans.Response.Usage, in, out)
	}
	if ans.Endpoint == nil || p.Served != ans.Endpoint || ans.Response.ID != "msg_keel_r1" || ans.Response.StopReason != llm.StopEndTurn {
		t.Errorf("answer %+v endpoint %v", ans.Response, ans.Endpoint)
	}
	if rep.merges != 0 || p.Merged {
		t.Error("merged without MergeCall")
	}
}

// assertFragment checks that fragment i's two replicas started on distinct
// candidates, the first won, and its answer is in the fused text.
func (f *fakeReplicas) assertFragment(t *testing.T, i int, fused string) {
	t.Helper()
	if got := f.starts[i]; len(got) != 2 || got[0] == got[1] {
		t.Errorf("fragment %d's replicas started on %v, want 2 distinct candidates", i, got)
	}
	if got, ok := f.won[i]; !ok || got != f.starts[i][0] {
		t.Errorf("fragment %d: winner %v %v, want its first replica", i, got, ok)
	}
	if !strings.Contains(fused, fmt.Sprintf("Answer %d.", i)) {
		t.Errorf("fused text %q lacks fragment %d's answer", fused, i)
	}
}

func TestStagePlainPath(t *testing.T) {
	rep := newFakeReplicas(2, func(int, int) (string, error) { return "x", nil })
	for _, tc := range []struct {
		name string
		s    *stageRun
		doc  string
	}{
		{"not eligible (below full, or legacy)", &stageRun{fragment: yes}, document(5)},
		{"under the threshold", &stageRun{eligible: true}, document(1)},
		{"asked, but one fragment", &stageRun{eligible: true, fragment: yes}, "A short question."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ans, err := tc.s.serve(t, Config{ThresholdTokens: 100, TargetTokens: 200}, rep, tc.doc)
			if err != nil || !tc.s.nextRan || ans.Response.ID != "plain" || tc.s.part != nil {
				t.Errorf("answer %v err %v next %v part %v", ans, err, tc.s.nextRan, tc.s.part)
			}
		})
	}
}

func TestStageStreamReplays(t *testing.T) {
	rep := newFakeReplicas(2, func(part, _ int) (string, error) { return fmt.Sprintf("Answer %d.", part), nil })
	s := &stageRun{eligible: true, stream: true, fragment: yes}
	ans, err := s.serve(t, Config{TargetTokens: 200}, rep, document(4))
	if err != nil {
		t.Fatal(err)
	}
	if ans.Response != nil || !pipeline.Ready(ans.Events) {
		t.Fatal("a streamed call's fused answer is not a ready stream")
	}
	var a llm.Accumulator
	for {
		ev, err := ans.Events.Next()
		if err == io.EOF {
			break
		}
		a.Add(ev)
	}
	ans.Events.Close()
	if got := a.Response().Text(); !strings.HasPrefix(got, "Answer 1.") {
		t.Errorf("replayed %q", got)
	}
}

// A fragment every replica of which failed is said, never a silent gap;
// when every fragment failed the call fails through Fail.
func TestStageLostFragments(t *testing.T) {
	down := errors.New("upstream down")
	rep := newFakeReplicas(2, func(part, _ int) (string, error) {
		if part == 2 {
			return "", down
		}
		return fmt.Sprintf("Answer %d.", part), nil
	})
	s := &stageRun{eligible: true, fragment: yes}
	ans, err := s.serve(t, Config{TargetTokens: 200}, rep, document(4))
	if err != nil {
		t.Fatal(err)
	}
	p := s.part
	if p.FragmentsOK != p.Fragments-1 || p.Details[1].Outcome != OutcomeFailed || len(p.LostRanges) != 1 {
		t.Fatalf("part %+v", p)
	}
	if want := "[keel: input byte ranges " + p.LostRanges[0] + " could not be processed; every replica failed]"; !strings.HasSuffix(ans.Response.Text(), want) {
		t.Errorf("text %q, want it to end with %q", ans.Response.Text(), want)
	}

	all := newFakeReplicas(2, func(int, int) (string, error) { return "", down })
	s = &stageRun{eligible: true, fragment: yes}
	_, err = s.serve(t, Config{TargetTokens: 200}, all, document(4))
	if err == nil || !strings.HasPrefix(err.Error(), "mapped: ") || !strings.Contains(err.Error(), "every replica of all") {
		t.Errorf("err %v, want the fan-out's error through Fail", err)
	}
}

func TestStageStructured(t *testing.T) {
	schema := `{"type":"object","properties":{"items":{"type":"array","items":{"type":"string"}}}}`
	s0, err := structured.Compile(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	spec := &structured.Spec{Schema: s0, Raw: json.RawMessage(schema), Source: "response_format.json_schema"}
	t.Run("JSON answers fuse as JSON, repaired per fragment", func(t *testing.T) {
		rep := newFakeReplicas(2, func(part, _ int) (string, error) {
			return fmt.Sprintf("```json\n{\"items\":[\"item %d\"],}\n```", part), nil
		})
		s := &stageRun{eligible: true, fragment: yes, spec: spec, mayFail: true}
		ans, err := s.serve(t, Config{TargetTokens: 200}, rep, document(3))
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ Items []string }
		if err := json.Unmarshal([]byte(ans.Response.Text()), &got); err != nil || len(got.Items) != s.part.Fragments {
			t.Errorf("fused %q (%v), want one item per fragment", ans.Response.Text(), err)
		}
	})
	t.Run("prose under a contract: 502 schema violation", func(t *testing.T) {
		rep := newFakeReplicas(2, func(int, int) (string, error) { return "Some prose.", nil })
		s := &stageRun{eligible: true, fragment: yes, spec: spec, mayFail: true}
		_, err := s.serve(t, Config{TargetTokens: 200}, rep, document(3))
		var ae *llm.APIError
		if !errors.As(err, &ae) || ae.MeshCode != llm.MeshSchemaViolation {
			t.Errorf("err %v, want MESH_SCHEMA_VIOLATION", err)
		}
	})
	t.Run("prose under JSON mode: fused as text, a violation", func(t *testing.T) {
		rep := newFakeReplicas(2, func(part, _ int) (string, error) { return fmt.Sprintf("Prose %d.", part), nil })
		s := &stageRun{eligible: true, fragment: yes, spec: spec}
		ans, err := s.serve(t, Config{TargetTokens: 200}, rep, document(3))
		if err != nil || !s.part.Violation || !strings.Contains(ans.Response.Text(), "Prose 1.") {
			t.Errorf("answer %v err %v part %+v", ans, err, s.part)
		}
	})
}

func TestStageMergeCall(t *testing.T) {
	rep := newFakeReplicas(2, func(part, _ int) (string, error) { return fmt.Sprintf("Answer %d.", part), nil })
	rep.merge = "One merged answer."
	s := &stageRun{eligible: true, fragment: yes}
	ans, err := s.serve(t, Config{TargetTokens: 200, MergeCall: true}, rep, document(3))
	if err != nil {
		t.Fatal(err)
	}
	if rep.merges != 1 || !s.part.Merged || ans.Response.Text() != "One merged answer." {
		t.Errorf("merges %d merged %v text %q", rep.merges, s.part.Merged, ans.Response.Text())
	}
	if want := 10*2*s.part.Fragments + 100; s.part.Usage.InputTokens != want {
		t.Errorf("input tokens %d, want %d (the merge call's included)", s.part.Usage.InputTokens, want)
	}
	// A failed merge call leaves the concatenation.
	rep2 := newFakeReplicas(2, func(part, _ int) (string, error) { return fmt.Sprintf("Answer %d.", part), nil })
	s2 := &stageRun{eligible: true, fragment: yes}
	ans2, err := s2.serve(t, Config{TargetTokens: 200, MergeCall: true}, rep2, document(3))
	if err != nil || s2.part.Merged || !strings.HasPrefix(ans2.Response.Text(), "Answer 1.") {
		t.Errorf("failed merge: merged %v text %q err %v", s2.part.Merged, ans2.Response.Text(), err)
	}
}

func TestWants(t *testing.T) {
	no := false
	long := document(5)
	user := func(text string) *llm.Request {
		return &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: text}}}}}
	}
	stream := user(long)
	stream.Stream = true
	tool := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockToolResult}}}}}
	for _, tc := range []struct {
		name      string
		req       *llm.Request
		b         *pipeline.Behavior
		threshold int
		want      bool
	}{
		{"over the threshold", user(long), nil, 100, true},
		{"under the threshold", user("short"), nil, 100, false},
		{"no threshold, not asked", user(long), nil, 0, false},
		{"asked", user("short"), &pipeline.Behavior{Fragment: yes}, 0, true},
		{"refused over the threshold", user(long), &pipeline.Behavior{Fragment: &no}, 100, false},
		{"a stream not asked, no threshold", stream, nil, 0, false},
		{"a stream over the threshold", stream, nil, 100, true},
		{"a tool result is no document", tool, &pipeline.Behavior{Fragment: yes}, 0, false},
		{"no user message", &llm.Request{}, &pipeline.Behavior{Fragment: yes}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc, idx, ok := Wants(tc.req, tc.b, tc.threshold)
			if ok != tc.want || ok && (idx != 0 || doc != tc.req.Messages[0].Text()) {
				t.Errorf("Wants = %q… %d %v, want %v", doc[:min(len(doc), 20)], idx, ok, tc.want)
			}
		})
	}
}
