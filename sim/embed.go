package sim

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/keelmesh/keel/internal/llm"
)

// The embeddings endpoint, POST /v1/embeddings, speaks OpenAI's Embeddings
// API (platform.openai.com/docs/api-reference/embeddings; the request and
// response types of openai-go v3.98.0, embedding.go): {model, input: a
// string, a list of strings, a list of token ids or a list of such lists,
// encoding_format "float" (default) or "base64", dimensions, user} answered
// with {object: "list", data: [{object: "embedding", index, embedding}],
// model, usage: {prompt_tokens, total_tokens}}, and errors in OpenAI's error
// shape. As OpenAI's text-embedding-3 models do, it returns unit-length
// vectors (so cosine similarity is the dot product), accepts dimensions only
// on text-embedding-3 models (shortening a vector and re-normalising it),
// refuses an empty string, more than 2048 inputs and more than 8192 tokens
// in one input with a 400, and an unknown model with a 404
// model_not_found.
//
// What it does not model: it is not a learned model. A vector is a bag of
// content-word features (Embed) hashed into the dimensions, so paraphrases
// that share content words, or words its small synonym table joins, come
// out close, and questions that differ in an entity, a number or a
// negation come out far; it does not know that "laptop" and "notebook
// computer" mean the same unless the table says so, nor read word order.
// It has no latency model, no rate limits and no faults but a region
// that is down (see serveEmbeddings).

// embeddingModels are the embedding models the fleet serves, with their
// native dimensions (OpenAI's embeddings guide) and whether they accept
// the dimensions parameter (text-embedding-3 and later only).
var embeddingModels = map[string]struct {
	dims    int
	shorten bool
}{
	"text-embedding-3-small": {1536, true},
	"text-embedding-3-large": {3072, true},
	"text-embedding-ada-002": {1536, false},
}

// Embedding input limits, as openai-go documents them: at most 2048 inputs
// per request and 8192 tokens per input.
const (
	maxEmbeddingInputs = 2048
	maxEmbeddingTokens = 8192
)

// embeddingRequest is the Embeddings API request body.
type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// EmbeddingInputs parses an Embeddings API request body into its model,
// its inputs (a token array becomes its ids joined by spaces, each id one
// feature), the output dimensions and whether the vectors are wanted in
// base64. A body the real API refuses is an *llm.APIError with status 400
// or 404 in the message OpenAI uses.
func EmbeddingInputs(body []byte) (model string, inputs []string, dims int, b64 bool, err error) {
	var r embeddingRequest
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(&r); err != nil || d.More() {
		return "", nil, 0, false, badEmbedding("", "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.")
	}
	if r.Model == "" {
		return "", nil, 0, false, badEmbedding("model", "you must provide a model parameter")
	}
	m, ok := embeddingModels[r.Model]
	if !ok {
		return "", nil, 0, false, &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound, Code: "model_not_found",
			Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", r.Model)}
	}
	switch r.EncodingFormat {
	case "", "float":
	case "base64":
		b64 = true
	default:
		return "", nil, 0, false, badEmbedding("encoding_format", fmt.Sprintf("%q is not one of ['float', 'base64'] - 'encoding_format'", r.EncodingFormat))
	}
	dims = m.dims
	if r.Dimensions != nil {
		switch {
		case !m.shorten:
			return "", nil, 0, false, badEmbedding("dimensions", "This model does not support specifying dimensions.")
		case *r.Dimensions < 1 || *r.Dimensions > m.dims:
			return "", nil, 0, false, badEmbedding("dimensions", fmt.Sprintf("Invalid value for 'dimensions' = %d. Must be between 1 and %d.", *r.Dimensions, m.dims))
		}
		dims = *r.Dimensions
	}
	if inputs, ok = embeddingInput(r.Input); !ok {
		return "", nil, 0, false, badEmbedding("input", "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.")
	}
	if len(inputs) > maxEmbeddingInputs {
		return "", nil, 0, false, badEmbedding("input", fmt.Sprintf("'$.input' is invalid: at most %d inputs per request, got %d.", maxEmbeddingInputs, len(inputs)))
	}
	for i, s := range inputs {
		if n := embedTokens(s); n > maxEmbeddingTokens {
			return "", nil, 0, false, badEmbedding("input", fmt.Sprintf("This model's maximum context length is %d tokens, however you requested %d tokens in input %d. Please reduce your prompt; or completion length.", maxEmbeddingTokens, n, i))
		}
	}
	return r.Model, inputs, dims, b64, nil
}

func badEmbedding(param, msg string) *llm.APIError {
	return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, Param: param, Message: msg}
}

// embeddingInput reads input: a non-empty string, a non-empty list of
// non-empty strings, a non-empty list of token ids, or a non-empty list of
// non-empty lists of token ids.
func embeddingInput(raw json.RawMessage) ([]string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}, s != ""
	}
	var ss []string
	if json.Unmarshal(raw, &ss) == nil && len(ss) > 0 {
		for _, s := range ss {
			if s == "" {
				return nil, false
			}
		}
		return ss, true
	}
	var ids []uint32
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return []string{tokenText(ids)}, true
	}
	var idss [][]uint32
	if json.Unmarshal(raw, &idss) == nil && len(idss) > 0 {
		out := make([]string, len(idss))
		for i, ids := range idss {
			if len(ids) == 0 {
				return nil, false
			}
			out[i] = tokenText(ids)
		}
		return out, true
	}
	return nil, false
}

// tokenText spells token ids as words ("#17 #4"), each one feature.
func tokenText(ids []uint32) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("tok")
		b.WriteString(strconv.FormatUint(uint64(id), 10))
	}
	return b.String()
}

// embedTokens estimates a text's tokens: its space-separated words plus one
// per Han character (a tokenizer spends about one on each).
func embedTokens(s string) int {
	n := countWords(s)
	for _, r := range s {
		if unicode.Is(unicode.Han, r) {
			n++
		}
	}
	return n
}

// serveEmbeddings serves POST /v1/embeddings and, in every region of the
// fleet (OpenAI serves its embedding models wherever it serves its API),
// POST /r/REGION/v1/embeddings: an unknown region is a 404, a region that
// is down resets the connection as for any call, so a client's failover
// to another region can be shown.
func (f *Fleet) serveEmbeddings(w http.ResponseWriter, r *http.Request) {
	if name := r.PathValue("region"); name != "" {
		reg := f.regions[name]
		if reg == nil {
			writeAPIError(w, openaiCodec, &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound,
				Message: fmt.Sprintf("region %q not found", name)})
			return
		}
		if reg.down.Load() {
			resetConn(w)
			return
		}
		w.Header().Set("X-Sim-Region", name)
	}
	body, err := readBody(r, nil)
	if err != nil {
		return
	}
	if len(body) > maxBodyBytes {
		writeAPIError(w, openaiCodec, &llm.APIError{Status: http.StatusRequestEntityTooLarge, Type: llm.ErrTooLarge, Message: tooLargeMessage})
		return
	}
	model, inputs, dims, b64, err := EmbeddingInputs(body)
	if err != nil {
		writeAPIError(w, openaiCodec, err.(*llm.APIError))
		return
	}
	type datum struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []datum `json:"data"`
		Model  string  `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}{Object: "list", Data: make([]datum, len(inputs)), Model: model}
	for i, s := range inputs {
		v := Embed(s, dims)
		var e any = v
		if b64 {
			// base64 of the little-endian float32s, as OpenAI sends them.
			raw := make([]byte, 4*len(v))
			for j, x := range v {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(x))
			}
			e = base64.StdEncoding.EncodeToString(raw)
		}
		out.Data[i] = datum{Object: "embedding", Index: i, Embedding: e}
		out.Usage.PromptTokens += embedTokens(s)
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	writeJSON(w, http.StatusOK, &out)
}

// Embed returns the fleet's embedding of text in dims dimensions: a unit
// vector (L2 norm 1) that depends only on text and dims. Its features are
// the text's content words (lower-cased, English stop words dropped,
// lightly stemmed, common paraphrase pairs joined by a synonym table,
// numbers and capitalised names weighted up, a handful of generic words
// weighted down, a negation as one feature) and, for Chinese, character
// bigrams and unigrams after the same kind of stop-word and synonym
// handling; each feature adds its weight at a hashed, signed coordinate.
// A text without features (only stop words) embeds as a fixed unit
// vector.
func Embed(text string, dims int) []float32 {
	acc := make([]float64, dims)
	n := 0
	embedFeatures(text, func(feat string, w float64) {
		h := fnv.New64a()
		h.Write([]byte(feat))
		x := h.Sum64()
		i := int(x % uint64(dims))
		if x>>63 == 1 {
			w = -w
		}
		acc[i] += w
		n++
	})
	if n == 0 {
		acc[0] = 1
	}
	var sum float64
	for _, x := range acc {
		sum += x * x
	}
	norm := math.Sqrt(sum)
	out := make([]float32, dims)
	for i, x := range acc {
		out[i] = float32(x / norm)
	}
	return out
}

// Feature weights.
const (
	weightWord    = 1.0
	weightLight   = 0.3 // generic words (lightWords)
	weightName    = 1.8 // a capitalised word not starting a sentence, an acronym
	weightNumber  = 2.0
	weightNegate  = 2.0
	weightHanBi   = 1.0
	weightHanUni  = 0.35
	negateFeature = "¬"
)

// embedFeatures calls add for each feature of text.
func embedFeatures(text string, add func(string, float64)) {
	negated := false
	sentenceStart := true
	// dir marks the next content word as a direction's target ("convert
	// a string to an integer": →integer), after to, into or from follows
	// a content word; number is a number just read, for a Chinese unit
	// that follows it at once (14天).
	dir, number := "", ""
	prevContent := false
	for len(text) > 0 {
		r, size := utf8.DecodeRuneInString(text)
		switch {
		case unicode.Is(unicode.Han, r):
			end := size
			for end < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[end:])
				if !unicode.Is(unicode.Han, r2) {
					break
				}
				end += s2
			}
			if hanFeatures(text[:end], number, add) {
				negated = true
			}
			text = text[end:]
			sentenceStart = false
			dir, number, prevContent = "", "", false
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			end := size
			for end < len(text) {
				r2, s2 := utf8.DecodeRuneInString(text[end:])
				inner := (r2 == '\'' || r2 == '’' || r2 == '.' || r2 == ',' || r2 == '-') && end+s2 < len(text)
				if inner {
					r3, _ := utf8.DecodeRuneInString(text[end+s2:])
					inner = unicode.IsLetter(r3) || unicode.IsDigit(r3)
				}
				if unicode.Is(unicode.Han, r2) || !(unicode.IsLetter(r2) || unicode.IsDigit(r2) || inner) {
					break
				}
				end += s2
			}
			word, content := text[:end], ""
			if wordFeatures(word, sentenceStart, func(f string, w float64) {
				add(f, w)
				if strings.HasPrefix(f, "w:") || strings.HasPrefix(f, "#") {
					content = strings.TrimPrefix(f, "w:")
				}
			}) {
				negated = true
			}
			number = ""
			if isNumber(word) {
				number = strings.ReplaceAll(word, ",", "")
			}
			switch lw := strings.ToLower(word); {
			case content != "":
				if dir != "" {
					add(dir+content, weightWord)
				}
				dir, prevContent = "", true
			case prevContent && (lw == "to" || lw == "into"):
				dir = "→"
			case prevContent && lw == "from":
				dir = "←"
			}
			text = text[end:]
			sentenceStart = false
		default:
			if r == '.' || r == '?' || r == '!' || r == '\n' || r == ':' {
				sentenceStart = true
				dir, prevContent = "", false
			}
			if !unicode.IsSpace(r) {
				number = ""
			}
			text = text[size:]
		}
	}
	if negated {
		add(negateFeature, weightNegate)
	}
}

// wordFeatures adds the features of one Latin-script word (letters, digits,
// inner apostrophes, dots, commas and hyphens) and reports a negation.
func wordFeatures(w string, sentenceStart bool, add func(string, float64)) (negation bool) {
	w = strings.ReplaceAll(w, "’", "'")
	if isNumber(w) {
		add("#"+strings.ReplaceAll(w, ",", ""), weightNumber)
		return false
	}
	lower := strings.ToLower(w)
	if strings.HasSuffix(lower, "n't") {
		negation = true
		lower = strings.TrimSuffix(lower, "n't")
		if lower == "wo" {
			lower = "will"
		} else if lower == "ca" {
			lower = "can"
		}
	} else if i := strings.IndexByte(lower, '\''); i > 0 {
		lower = lower[:i] // what's, it's, I'm, customer's
	}
	if strings.Contains(lower, "-") {
		for part := range strings.SplitSeq(lower, "-") {
			if part != "" && wordFeatures(part, true, add) {
				negation = true
			}
		}
		return negation
	}
	if negationWords[lower] {
		return true
	}
	if n, ok := numberWords[lower]; ok {
		add("#"+n, weightNumber)
		return negation
	}
	if stopWords[lower] {
		return negation
	}
	weight := weightWord
	first, _ := utf8.DecodeRuneInString(w)
	switch {
	case len(w) >= 2 && strings.ToUpper(w) == w && !isNumber(w):
		weight = weightName // an acronym: VAT, EU, SSO
	case unicode.IsUpper(first) && !sentenceStart && lower != "i":
		weight = weightName
	}
	stem, ok := synonyms[lower]
	if !ok {
		stem = stemWord(lower)
		if s, ok := synonyms[stem]; ok {
			stem = s
		}
	}
	if weight == weightWord && lightWords[stem] {
		weight = weightLight
	}
	add("w:"+stem, weight)
	return negation
}

func isNumber(w string) bool {
	digit := false
	for _, r := range w {
		switch {
		case r >= '0' && r <= '9':
			digit = true
		case r == '.' || r == ',':
		default:
			return false
		}
	}
	return digit
}

// stemWord strips common English inflections from a lower-cased word.
func stemWord(w string) string {
	if s, ok := irregular[w]; ok {
		return s
	}
	n := len(w)
	switch {
	case n > 5 && strings.HasSuffix(w, "ies"):
		return w[:n-3] + "y"
	case n > 5 && strings.HasSuffix(w, "ing"):
		return undouble(w[:n-3])
	case n > 4 && strings.HasSuffix(w, "ied"):
		return w[:n-3] + "y"
	case n > 4 && strings.HasSuffix(w, "ed"):
		return undouble(w[:n-2])
	case n > 5 && strings.HasSuffix(w, "ly"):
		return w[:n-2]
	case n > 4 && (strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "xes")):
		return w[:n-2]
	case n > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:n-1]
	}
	return w
}

// undouble turns "stopp" into "stop" and "charg" into "charge".
func undouble(s string) string {
	n := len(s)
	if n >= 2 && s[n-1] == s[n-2] && !strings.ContainsRune("lsz", rune(s[n-1])) {
		return s[:n-1]
	}
	if n >= 2 && strings.ContainsRune("gcv", rune(s[n-1])) && !strings.ContainsRune("aeiou", rune(s[n-2])) {
		return s + "e"
	}
	return s
}

// hanFeatures adds the features of one run of Han characters and reports a
// negation: synonym phrases are replaced first, stop phrases and
// characters removed, Chinese numerals read as numbers; what remains gives
// its bigrams and unigrams.
//
// A number followed at once by a unit (三天, 一个月, 14天 when lead is "14")
// is one feature with its unit, so "one month" and "one year" differ by
// more than a character.
func hanFeatures(run, lead string, add func(string, float64)) (negation bool) {
	for _, p := range hanSynonyms {
		run = strings.ReplaceAll(run, p[0], p[1])
	}
	for _, p := range hanStopPhrases {
		run = strings.ReplaceAll(run, p, "|")
	}
	var seg []rune
	flush := func() {
		for i, r := range seg {
			add("h:"+string(r), weightHanUni)
			if i+1 < len(seg) {
				add("h:"+string(seg[i:i+2]), weightHanBi)
			}
		}
		seg = seg[:0]
	}
	rs := []rune(run)
	unit := func(i int, n string) int {
		if i < len(rs) && rs[i] == '个' {
			i++
		}
		if i < len(rs) && strings.ContainsRune(hanUnits, rs[i]) {
			add("#"+n+string(rs[i]), weightNumber)
			return i + 1
		}
		return -1
	}
	start := 0
	if lead != "" {
		if j := unit(0, lead); j > 0 {
			start = j
		}
	}
	for i := start; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '|' || strings.ContainsRune(hanStopChars, r):
			flush()
		case strings.ContainsRune(hanNegation, r):
			negation = true
			flush()
		case hanDigit(r) >= 0:
			flush()
			n := 0
			j := i
			for ; j < len(rs) && hanDigit(rs[j]) >= 0; j++ {
			}
			n = hanNumber(rs[i:j])
			add("#"+strconv.Itoa(n), weightNumber)
			i = j - 1
			if k := unit(j, strconv.Itoa(n)); k > 0 {
				i = k - 1
			}
		default:
			seg = append(seg, r)
		}
	}
	flush()
	return negation
}

// hanDigit returns the value of a Chinese numeral character (十 is 10, 百
// 100), or -1.
func hanDigit(r rune) int {
	if i := strings.IndexRune("零一二三四五六七八九", r); i >= 0 {
		return i / 3
	}
	switch r {
	case '两':
		return 2
	case '十':
		return 10
	case '百':
		return 100
	case '千':
		return 1000
	}
	return -1
}

// hanNumber reads a run of Chinese numerals: 三 3, 十五 15, 二十 20, 三百五十 350.
func hanNumber(rs []rune) int {
	total, cur := 0, 0
	for _, r := range rs {
		d := hanDigit(r)
		if d >= 10 {
			if cur == 0 {
				cur = 1
			}
			total += cur * d
			cur = 0
		} else {
			cur = cur*10 + d
		}
	}
	return total + cur
}

var stopWords = setOf(`a an the is are was were be been being am do does did doing done have has had having
i me my mine myself you your yours yourself we our ours us it its itself this that these those there here
what which how whats hows can could would should will shall may might must to of in on at for with from by
about as into onto than then so if or and but also just very really please any some each much many
one's ones kindly hi hello hey thanks thank there's let lets know wonder wondering tell anyone anybody
someone somebody something anything way possible able go going gonna want wanna need like would've ok okay
currently actually basically exactly still even ever usually typically generally
every all off up`)

// lightWords are generic words that carry little of a question's meaning:
// they count, at weightLight.
var lightWords = setOf(`get make work use help explain find look happen thing take give happen option
process procedure step info information detail question problem issue right correct best good way
happen long time new current exist available allow let`)

var negationWords = setOf(`not no never without cannot can't nor none neither`)

var numberWords = map[string]string{"zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
	"seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "fifteen": "15", "twenty": "20",
	"thirty": "30", "fifty": "50", "hundred": "100", "first": "1", "second": "2", "third": "3", "once": "1", "twice": "2",
	"single": "1", "double": "2", "half": "0.5"}

var irregular = map[string]string{"bought": "buy", "sent": "send", "paid": "pay", "left": "leave", "took": "take",
	"gave": "give", "made": "make", "got": "get", "gotten": "get", "went": "go", "forgot": "forget", "forgotten": "forget",
	"lost": "lose", "broke": "break", "broken": "break", "chose": "choose", "chosen": "choose", "children": "child",
	"people": "person", "men": "man", "women": "woman", "feet": "foot", "teeth": "tooth", "mice": "mouse",
	"running": "run", "ran": "run", "shipping": "ship", "shipped": "ship", "billing": "bill", "billed": "bill",
	"does": "do", "did": "do", "done": "do", "has": "have", "had": "have", "spent": "spend", "wrote": "write",
	"written": "write", "began": "begin", "begun": "begin", "ate": "eat", "eaten": "eat", "slept": "sleep",
	"fell": "fall", "fallen": "fall", "drove": "drive", "driven": "drive", "felt": "feel", "kept": "keep",
	"meant": "mean", "met": "meet", "said": "say", "thought": "think", "understood": "understand", "won": "win"}

// synonyms join common paraphrase pairs (after stemming) into one feature.
var synonyms = map[string]string{
	"cancellation": "cancel", "terminate": "cancel", "termination": "cancel", "unsubscribe": "cancel", "stop": "cancel",
	"quit": "quit", "resign": "quit", "resignation": "quit", "leave": "quit",
	"reimbursement": "refund", "reimburse": "refund",
	"purchase": "buy", "order": "order", "acquire": "buy",
	"cost": "price", "fee": "price", "charge": "price", "pricing": "price", "expensive": "price", "cheap": "price", "rate": "price",
	"password": "password", "passcode": "password", "pwd": "password",
	"reset": "reset", "recover": "reset", "restore": "reset", "retrieve": "reset",
	"sign": "login", "signin": "login", "log": "login", "login": "login", "logon": "login",
	"register": "signup", "signup": "signup", "enroll": "signup", "enrol": "signup",
	"delete": "remove", "erase": "remove", "wipe": "remove", "removal": "remove", "deletion": "remove",
	"modify": "change", "edit": "change", "update": "change", "alter": "change", "switch": "change", "adjust": "change",
	"ship": "deliver", "delivery": "deliver", "shipment": "deliver", "arrive": "deliver", "arrival": "deliver",
	"parcel": "package", "packet": "package",
	"begin": "start", "commence": "start", "launch": "start",
	"end": "finish", "complete": "finish", "conclude": "finish",
	"big": "large", "huge": "large", "enormous": "large",
	"small": "little", "tiny": "little",
	"quick": "fast", "rapid": "fast", "speedy": "fast", "quickly": "fast", "soon": "fast",
	"movie": "film", "picture": "photo", "image": "photo",
	"car": "car", "automobile": "car", "vehicle": "car",
	"doctor": "doctor", "physician": "doctor", "gp": "doctor",
	"medicine": "medication", "drug": "medication", "medicat": "medication", "pill": "medication", "tablet": "medication",
	"lawyer": "lawyer", "attorney": "lawyer", "solicitor": "lawyer",
	"sue": "lawsuit", "suit": "lawsuit", "litigation": "lawsuit",
	"salary": "pay", "wage": "pay", "payment": "pay", "payout": "pay", "repay": "pay",
	"error": "bug", "fault": "bug", "defect": "bug", "glitch": "bug",
	"crash": "crash", "freeze": "crash",
	"fix": "fix", "repair": "fix", "solve": "fix", "resolve": "fix", "troubleshoot": "fix",
	"install": "install", "setup": "install", "set": "install",
	"opening": "open", "hour": "hour", "hrs": "hour",
	"shut": "close", "closing": "close",
	"allowed": "allow", "permit": "allow", "permitted": "allow",
	"receipt": "invoice", "bill": "invoice",
	"email": "email", "mail": "email",
	"phone": "phone", "telephone": "phone", "mobile": "phone", "cell": "phone",
	"address": "address", "location": "address",
	"exchange": "return",
	"tax":      "tax", "taxes": "tax",
	"job": "job", "position": "job", "role": "job",
	"travel": "trip", "journey": "trip",
	"flight": "flight", "fly": "flight", "plane": "flight",
	"hotel": "hotel", "accommodation": "hotel", "lodging": "hotel",
	"account": "account", "profile": "account",
	"subscription": "subscription", "plan": "subscription", "membership": "subscription",
	"upgrade": "upgrade", "downgrade": "downgrade",
	"week": "week", "weekly": "week", "day": "day", "daily": "day", "month": "month", "monthly": "month", "year": "year", "annual": "year", "yearly": "year",
	"kid": "child", "toddler": "child", "baby": "infant",
	"sick": "ill", "illness": "ill", "unwell": "ill",
	"symptom": "symptom",
	"dose":    "dosage", "dosage": "dosage",
	"warranty": "warranty", "guarantee": "warranty",
	"contract": "contract", "agreement": "contract",
	"rent": "rent", "lease": "rent", "rental": "rent",
	"landlord": "landlord", "tenant": "tenant",
	"loan": "loan", "mortgage": "mortgage",
	"interest": "interest",
	"invest":   "invest", "investment": "invest",
	"stock": "stock", "share": "stock", "equity": "stock",
	"profit": "profit", "earning": "profit", "revenue": "revenue", "income": "income",
	"translate": "translate", "translation": "translate",
	"summarize": "summary", "summarise": "summary", "summary": "summary",
	"function": "function", "method": "function",
	"variable": "variable", "var": "variable",
	"string": "string", "str": "string",
	"array": "list", "list": "list", "slice": "list",
	"dictionary": "map", "dict": "map", "hashmap": "map",
	"loop": "loop", "iterate": "loop", "iteration": "loop",
	"sort":    "sort",
	"convert": "convert", "conversion": "convert", "transform": "convert", "turn": "convert",
	"reverse": "reverse", "invert": "reverse",
	"compute": "calculate", "calculation": "calculate", "figure": "calculate",
	"meaning": "mean", "definition": "mean", "define": "mean",
	"difference": "differ", "different": "differ", "distinguish": "differ", "versus": "differ", "vs": "differ", "compare": "differ", "comparison": "differ",
	"weather": "weather", "forecast": "weather",
	"recipe": "recipe", "cook": "recipe", "bake": "recipe", "prepare": "recipe",
	"lose": "lose", "misplace": "lose", "missing": "lose",
	"damaged": "damage", "break": "damage", "broken": "damage",
	"colleague": "colleague", "teammate": "colleague", "coworker": "colleague",
	"boss": "employer", "manager": "employer",
	"undo": "undo", "revert": "undo", "rollback": "undo",
	"duplicate": "duplicate", "deduplicate": "duplicate", "dedupe": "duplicate",
	"recommend": "recommend", "suggest": "recommend",
	"see": "view", "look": "view", "view": "view", "read": "view",
	"receive": "deliver", "received": "deliver",
	"freelancer": "freelance", "freelancing": "freelance",
	"late": "delay", "delayed": "delay", "overdue": "delay",
	"track": "track", "tracking": "track", "status": "track", "whereabout": "track",
	"contact": "contact", "reach": "contact", "call": "contact",
	"support": "support", "service": "support", "helpdesk": "support", "agent": "support",
}

// hanSynonyms join common Chinese paraphrase pairs, longest first; a
// phrase's second form is what it becomes.
var hanSynonyms = [][2]string{
	{"退钱", "退款"}, {"返还", "退款"}, {"退费", "退款"},
	{"取消订阅", "取消"}, {"退订", "取消"}, {"注销", "取消"},
	{"登陆", "登录"}, {"登入", "登录"},
	{"重置", "找回"}, {"重设", "找回"}, {"忘记了", "找回"}, {"忘了", "找回"}, {"忘记", "找回"},
	{"口令", "密码"},
	{"配送", "发货"}, {"送货", "发货"}, {"寄出", "发货"}, {"快递", "发货"}, {"物流", "发货"},
	{"到货", "送达"}, {"收到", "送达"},
	{"价钱", "价格"}, {"费用", "价格"}, {"价位", "价格"}, {"收费", "价格"}, {"多少钱", "价格"},
	{"修改", "更改"}, {"变更", "更改"}, {"改", "更改"}, {"换成", "更改"},
	{"删掉", "删除"}, {"移除", "删除"},
	{"营业时间", "开门时间"}, {"几点开门", "开门时间"},
	{"医生", "大夫"},
	{"药物", "药"}, {"药品", "药"},
	{"律师", "律师"},
	{"手机", "电话"},
	{"邮件", "邮箱"}, {"电子邮件", "邮箱"},
	{"地址", "地址"},
	{"工资", "薪水"}, {"薪资", "薪水"}, {"薪酬", "薪水"},
	{"故障", "错误"}, {"报错", "错误"}, {"出错", "错误"}, {"bug", "错误"},
	{"修复", "解决"}, {"处理", "解决"}, {"搞定", "解决"},
	{"安装", "安装"}, {"装", "安装"},
	{"区别", "差异"}, {"不同", "差异"}, {"差别", "差异"},
	{"计算", "算"},
	{"天气预报", "天气"},
	{"孩子", "儿童"}, {"小孩", "儿童"},
	{"发票", "收据"},
	{"会员", "订阅"}, {"套餐", "订阅"},
	{"账号", "账户"}, {"帐号", "账户"}, {"帐户", "账户"},
	{"租金", "房租"},
	{"贷款", "贷款"},
	{"保修", "保修"}, {"质保", "保修"},
	{"折扣码", "优惠码"}, {"折扣", "优惠"}, {"股息", "分红"}, {"应急", "紧急"}, {"表现", "症状"},
	{"破损", "损坏"}, {"坏了", "损坏"}, {"鸡蛋", "蛋"}, {"上限", "最大"}, {"名字", "名称"},
	{"转换为", "转换"}, {"转成", "转换"}, {"转为", "转换"}, {"通货膨胀", "通胀"}, {"有多远", "距离"},
}

// hanStopPhrases are removed from Chinese text before its features are
// taken: question frames and fillers, longest first.
var hanStopPhrases = []string{
	"请问一下", "请问", "麻烦问一下", "想问一下", "我想知道", "想知道", "能不能", "可不可以", "是不是", "有没有",
	"是什么原因", "什么原因", "多长时间", "怎么样", "怎么办", "怎样才能", "怎样", "怎么", "如何", "什么", "为什么", "哪些", "哪个", "哪里", "多少", "多久",
	"一下", "一些", "一点", "一样", "一定", "一般", "一起", "一直", "需要", "可以", "应该", "能够", "告诉我", "帮我", "给我",
	"我们", "你们", "他们", "自己", "这个", "那个", "这些", "那些", "现在", "目前", "的话", "还是", "或者", "关于", "吗", "呢",
}

// hanStopChars are single characters dropped as function words.
const hanStopChars = "的了吗呢吧啊呀么我你您他她它请是在和与及或也都就要会能把被给让对从到吧嘛哦哈个些这那有几"

// hanUnits are the units a Chinese number is read with.
const hanUnits = "天日月年周岁次台人倍元块分秒件张本位"

// hanNegation are the characters that negate: each becomes the negation
// feature.
const hanNegation = "不没未无"

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}
