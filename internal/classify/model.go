package classify

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The model file (model.bin), little-endian:
//
//	magic     "KCM1"
//	corpus    [32]byte  SHA-256 of the training corpus and feature version
//	k         uint16    number of domains
//	names     k × (uint8 length, bytes)
//	buckets   uint32    must equal numBuckets
//	scale     float32   weight = int8 × scale
//	bias      k × float32
//	weights   buckets × k × int8, bucket-major
//
// Weights are quantised to int8 with one scale, which keeps the file at
// numBuckets×k bytes; TestHeldOutAccuracy measures the quantised model.
const modelMagic = "KCM1"

type model struct {
	corpus  [32]byte
	domains []string
	bias    []float32
	w       []float32 // numBuckets × len(domains)
	scale   float32   // the int8 step of a decoded model; 0 for a trained one
}

var errModel = errors.New("malformed model file")

func decodeModel(data []byte) (*Classifier, error) {
	m, err := parseModel(data)
	if err != nil {
		return nil, err
	}
	return m.classifier(), nil
}

func parseModel(data []byte) (*model, error) {
	r := bytes.NewReader(data)
	magic := make([]byte, 4)
	if _, err := r.Read(magic); err != nil || string(magic) != modelMagic {
		return nil, fmt.Errorf("%w: bad magic", errModel)
	}
	m := &model{}
	if _, err := r.Read(m.corpus[:]); err != nil {
		return nil, fmt.Errorf("%w: %v", errModel, err)
	}
	var k uint16
	if err := binary.Read(r, binary.LittleEndian, &k); err != nil || k == 0 {
		return nil, fmt.Errorf("%w: domain count", errModel)
	}
	for range k {
		n, err := r.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errModel, err)
		}
		name := make([]byte, n)
		if _, err := r.Read(name); err != nil {
			return nil, fmt.Errorf("%w: %v", errModel, err)
		}
		m.domains = append(m.domains, string(name))
	}
	var buckets uint32
	var scale float32
	if err := binary.Read(r, binary.LittleEndian, &buckets); err != nil || buckets != numBuckets {
		return nil, fmt.Errorf("%w: %d buckets, want %d", errModel, buckets, numBuckets)
	}
	if err := binary.Read(r, binary.LittleEndian, &scale); err != nil {
		return nil, fmt.Errorf("%w: %v", errModel, err)
	}
	m.bias = make([]float32, k)
	if err := binary.Read(r, binary.LittleEndian, m.bias); err != nil {
		return nil, fmt.Errorf("%w: %v", errModel, err)
	}
	if r.Len() != numBuckets*int(k) {
		return nil, fmt.Errorf("%w: %d weight bytes, want %d", errModel, r.Len(), numBuckets*int(k))
	}
	rest := data[len(data)-r.Len():]
	m.w = make([]float32, len(rest))
	for i, q := range rest {
		m.w[i] = float32(int8(q)) * scale
	}
	m.scale = scale
	return m, nil
}

// classifier converts m to the fixed-point run-time form. A model read from
// a file keeps its exact int8 steps; a freshly trained one is quantised the
// same way the file would be.
func (m *model) classifier() *Classifier {
	scale := m.scale
	if scale == 0 {
		var maxAbs float32
		for _, v := range m.w {
			maxAbs = max(maxAbs, float32(math.Abs(float64(v))))
		}
		scale = maxAbs / 127
		if scale == 0 {
			scale = 1
		}
	}
	w := make([]int16, len(m.w))
	for i, v := range m.w {
		w[i] = int16(math.Round(float64(v / scale)))
	}
	return &Classifier{domains: m.domains, w: w, scale: scale, bias: m.bias}
}
