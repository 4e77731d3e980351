package classify

import (
	"os"
	"strconv"
	"testing"
)

// TestCrossValidate is the tool that chose the training hyper-parameters:
// 5-fold cross-validation on train.txt only (the held-out set plays no part).
// It is slow-ish and informational, so it runs only with CV=1; EP, LR and L2
// override the defaults, e.g. CV=1 L2=0.003 go test -run TestCrossValidate -v.
func TestCrossValidate(t *testing.T) {
	if os.Getenv("CV") == "" {
		t.Skip("set CV=1 to cross-validate")
	}
	if v := os.Getenv("EP"); v != "" {
		trainEpochs, _ = strconv.Atoi(v)
	}
	if v := os.Getenv("LR"); v != "" {
		trainLR, _ = strconv.ParseFloat(v, 64)
	}
	if v := os.Getenv("L2"); v != "" {
		trainL2, _ = strconv.ParseFloat(v, 64)
	}
	ex := readCorpus(t, "testdata/train.txt")
	correct := 0
	for f := 0; f < 5; f++ {
		var tr, te []example
		for i, e := range ex {
			if i%5 == f {
				te = append(te, e)
			} else {
				tr = append(tr, e)
			}
		}
		m := train(t, tr)
		c := m.classifier()
		for _, e := range te {
			if c.Classify(e.text).Domain == e.label {
				correct++
			}
		}
	}
	t.Logf("epochs=%d lr=%g l2=%g: 5-fold accuracy %.3f", trainEpochs, trainLR, trainL2, float64(correct)/float64(len(ex)))
}
