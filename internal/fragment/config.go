package fragment

// Config is the fragmentation section of Keel's configuration file,
// decoded straight from YAML (docs/config.md): long inputs are split at
// semantic boundaries, each fragment is sent to several endpoints, and the
// answers are fused by vote. The zero value is the documented default;
// zero fields mean the defaults of this package (DefaultTargetTokens,
// DefaultOverlapBudget, DefaultRedundancy, DefaultListQuorum). A Config is
// plain data, safe to copy.
type Config struct {
	// ThresholdTokens fragments every request whose last user message is
	// longer than this many (estimated) tokens; 0 (default) fragments only
	// requests that set mesh_behavior.fragment: true.
	ThresholdTokens int `yaml:"threshold_tokens"`
	// TargetTokens is a fragment's size; default DefaultTargetTokens.
	TargetTokens int `yaml:"target_tokens"`
	// OverlapBudget bounds repeated context, as a share of the input;
	// default DefaultOverlapBudget.
	OverlapBudget float64 `yaml:"overlap_budget"`
	// Redundancy is how many distinct endpoints answer each fragment;
	// default DefaultRedundancy.
	Redundancy int `yaml:"redundancy"`
	// ListQuorum is the share of replica confidence a list item needs to be
	// kept; nil means DefaultListQuorum (0 keeps the plain union).
	ListQuorum *float64 `yaml:"list_quorum"`
	// MergeCall merges free-text fragment answers with one final request
	// instead of concatenating them; default false.
	MergeCall bool `yaml:"merge_call"`
}

// Defaults of the Config fields that Split and Fuse do not default
// themselves.
const (
	DefaultRedundancy = 2
	DefaultListQuorum = 0.5
)

// Quorum is ListQuorum, or DefaultListQuorum when unset.
func (c Config) Quorum() float64 {
	if c.ListQuorum == nil {
		return DefaultListQuorum
	}
	return *c.ListQuorum
}
