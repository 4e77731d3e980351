package classify

import (
	"bufio"
	"crypto/sha256"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "retrain the model from testdata/train.txt and rewrite model.bin")

// example is one labelled text of a corpus file.
type example struct {
	label, text string
	line        int
}

// readCorpus parses the corpus format of testdata/*.txt:
//
//	-- a comment line
//	@@ finance            every following example has this label
//	one example per line
//	<<<
//	a multi-line example (code, stack traces, tables)
//	>>>
//
// Blank lines separate nothing and are skipped outside <<< >>>.
func readCorpus(t testing.TB, path string) []example {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		out   []example
		label string
		multi *strings.Builder
		start int
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case multi != nil && line == ">>>":
			out = append(out, example{label: label, text: strings.TrimSuffix(multi.String(), "\n"), line: start})
			multi = nil
		case multi != nil:
			multi.WriteString(line)
			multi.WriteByte('\n')
		case line == "<<<":
			if label == "" {
				t.Fatalf("%s:%d: example before any @@ label", path, n)
			}
			multi, start = &strings.Builder{}, n
		case strings.HasPrefix(line, "@@ "):
			label = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "--"), strings.TrimSpace(line) == "":
		default:
			if label == "" {
				t.Fatalf("%s:%d: example before any @@ label", path, n)
			}
			out = append(out, example{label: label, text: line, line: n})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if multi != nil {
		t.Fatalf("%s:%d: unterminated <<<", path, start)
	}
	return out
}

// Training hyper-parameters, chosen by 5-fold cross-validation on train.txt
// (TestCrossValidate), never on the held-out set.
var (
	trainEpochs = 40
	trainLR     = 0.5
	trainL2     = 1e-2
)

var domainOrder = []string{Finance, Medical, Legal, Code, General}

func corpusHash(t testing.TB) [32]byte {
	data, err := os.ReadFile("testdata/train.txt")
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(append(data, fmt.Sprintf("\nfeatures=%d buckets=%d", featureVersion, numBuckets)...))
}

// TestTrain checks that model.bin was trained from the current corpus and
// feature extraction; with -update it retrains and rewrites model.bin.
func TestTrain(t *testing.T) {
	h := corpusHash(t)
	if !*update {
		m, err := parseModel(modelBin)
		if err != nil {
			t.Fatalf("model.bin: %v", err)
		}
		if m.corpus != h {
			t.Fatal("model.bin is stale: run go test ./internal/classify -run TestTrain -update")
		}
		return
	}
	ex := readCorpus(t, "testdata/train.txt")
	m := train(t, ex)
	m.corpus = h
	if err := os.WriteFile("model.bin", encodeModel(m), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("trained on %d examples; wrote model.bin (rerun the tests to evaluate the new model)", len(ex))
}

// train fits a multinomial logistic regression by SGD with L2 regularisation
// applied to the weights a step touches. It is deterministic: a fixed seed
// orders the examples.
func train(t testing.TB, ex []example) *model {
	k := len(domainOrder)
	col := map[string]int{}
	for i, d := range domainOrder {
		col[d] = i
	}
	type vec struct {
		y     int
		feats map[uint32]float64
	}
	data := make([]vec, len(ex))
	perClass := make([]int, k)
	for i, e := range ex {
		y, ok := col[e.label]
		if !ok {
			t.Fatalf("line %d: unknown label %q", e.line, e.label)
		}
		perClass[y]++
		fs := appendFeatures(nil, e.text)
		m := map[uint32]float64{}
		inv := 1 / math.Sqrt(float64(len(fs)))
		for _, f := range fs {
			m[f] += inv
		}
		data[i] = vec{y: y, feats: m}
	}
	t.Logf("examples per class %v: %v", domainOrder, perClass)
	w := make([]float64, numBuckets*k)
	bias := make([]float64, k)
	rng := rand.New(rand.NewPCG(1, 2))
	epochs, lr0, l2 := trainEpochs, trainLR, trainL2
	order := make([]int, len(data))
	for i := range order {
		order[i] = i
	}
	p := make([]float64, k)
	for ep := 0; ep < epochs; ep++ {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		lr := lr0 / (1 + 0.1*float64(ep))
		for _, i := range order {
			d := data[i]
			copy(p, bias)
			for f, x := range d.feats {
				for c := 0; c < k; c++ {
					p[c] += w[int(f)*k+c] * x
				}
			}
			softmax(p)
			for c := 0; c < k; c++ {
				g := p[c]
				if c == d.y {
					g--
				}
				bias[c] -= lr * g * 0.1
				for f, x := range d.feats {
					wi := &w[int(f)*k+c]
					*wi -= lr * (g*x + l2**wi)
				}
			}
		}
	}
	m := &model{domains: domainOrder, bias: make([]float32, k), w: make([]float32, len(w))}
	for i, v := range bias {
		m.bias[i] = float32(v)
	}
	for i, v := range w {
		m.w[i] = float32(v)
	}
	return m
}

func TestHeldOutAccuracy(t *testing.T) {
	ex := readCorpus(t, "testdata/heldout.txt")
	c := Default()
	k := len(domainOrder)
	idx := map[string]int{}
	for i, d := range domainOrder {
		idx[d] = i
	}
	conf := make([][]int, k)
	for i := range conf {
		conf[i] = make([]int, k)
	}
	perClass := make([]int, k)
	correct := 0
	for _, e := range ex {
		sig := c.Classify(e.text)
		conf[idx[e.label]][idx[sig.Domain]]++
		perClass[idx[e.label]]++
		if sig.Domain == e.label {
			correct++
		} else {
			t.Logf("miss heldout.txt:%d want %s got %s (%.2f): %.70q", e.line, e.label, sig.Domain, sig.Confidence, e.text)
		}
	}
	for i, n := range perClass {
		if n < 20 {
			t.Errorf("held-out set has %d %s examples, want ≥ 20", n, domainOrder[i])
		}
	}
	acc := float64(correct) / float64(len(ex))
	var b strings.Builder
	fmt.Fprintf(&b, "confusion (rows = truth, columns = predicted)\n%10s", "")
	for _, d := range domainOrder {
		fmt.Fprintf(&b, "%9s", d)
	}
	for i, row := range conf {
		fmt.Fprintf(&b, "\n%10s", domainOrder[i])
		for _, v := range row {
			fmt.Fprintf(&b, "%9d", v)
		}
	}
	t.Log(b.String())
	t.Logf("held-out accuracy %.1f%% (%d/%d)", 100*acc, correct, len(ex))
	if acc < 0.90 {
		t.Errorf("held-out accuracy %.1f%%, want ≥ 90%%", 100*acc)
	}
}

// TestHeldOutDisjoint guards the held-out set against leaking into training.
func TestHeldOutDisjoint(t *testing.T) {
	train := map[string]int{}
	for _, e := range readCorpus(t, "testdata/train.txt") {
		train[strings.ToLower(strings.TrimSpace(e.text))] = e.line
	}
	for _, e := range readCorpus(t, "testdata/heldout.txt") {
		if l, ok := train[strings.ToLower(strings.TrimSpace(e.text))]; ok {
			t.Errorf("heldout.txt:%d repeats train.txt:%d", e.line, l)
		}
	}
}
