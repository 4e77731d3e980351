package config

// ApplyDefaults replaces every zero field that has a documented default by
// that default. It leaves invalid values (negative sizes, unknown types) for
// Validate to report, and is idempotent.
func (c *Config) ApplyDefaults() {
	s := &c.Server
	setString(&s.Listen, DefaultListen)
	if s.MaxBodyBytes == 0 {
		s.MaxBodyBytes = DefaultMaxBodyBytes
	}
	setDuration(&s.ShutdownTimeout, DefaultShutdownTimeout)
	setString(&s.LogFormat, DefaultLogFormat)
	setString(&s.LogLevel, DefaultLogLevel)
	setDuration(&s.BodyReadTimeout, DefaultBodyReadTimeout)
	if s.MinBodyRateBytesPerSec == 0 {
		s.MinBodyRateBytesPerSec = DefaultMinBodyRate
	}
	if s.MaxMessages == 0 {
		s.MaxMessages = DefaultMaxMessages
	}
	if s.MaxHeaderBytes == 0 {
		s.MaxHeaderBytes = DefaultMaxHeaderBytes
	}

	for i := range c.Providers {
		p := &c.Providers[i]
		if p.BaseURL == "" && p.Bedrock == nil && p.Vertex == nil {
			// A cloud platform's base is its region's host.
			switch p.Type {
			case TypeAnthropic:
				p.BaseURL = DefaultAnthropicBaseURL
			case TypeOpenAI:
				p.BaseURL = DefaultOpenAIBaseURL
			case TypeGemini:
				p.BaseURL = DefaultGeminiBaseURL
			}
		}
		setDuration(&p.Timeouts.Connect, DefaultConnectTimeout)
		setDuration(&p.Timeouts.ResponseHeader, DefaultResponseHeader)
		setDuration(&p.Timeouts.StreamIdle, DefaultStreamIdle)
		setDuration(&p.Timeouts.Request, DefaultRequestTimeout)
		if p.MaxIdleConnsPerHost == 0 {
			p.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
		}
	}
	for i := range c.Models {
		m := &c.Models[i]
		if m.Capability == 0 {
			m.Capability = DefaultCapability
		}
		if m.ContextWindow == 0 && m.Kind != KindEmbedding {
			m.ContextWindow = DefaultContextWindow
		}
		for j := range m.Endpoints {
			e := &m.Endpoints[j]
			setString(&e.Region, DefaultRegion)
			setString(&e.UpstreamModel, m.Name)
		}
	}
	for i := range c.Aliases {
		setString(&c.Aliases[i].Strategy, DefaultStrategy)
	}
	if c.KeysOn() {
		setString(&c.Keys.Path, DefaultKeysPath)
		setDuration(&c.Keys.RefreshInterval, DefaultKeysRefresh)
		c.Keys.Store = c.KeysStore()
	}
	if c.Cache.Enabled {
		c.Cache.Store = c.CacheStore()
	}
	if c.Redis.On() {
		setString(&c.Redis.KeyPrefix, DefaultRedisKeyPrefix)
		setDuration(&c.Redis.Timeout, DefaultRedisTimeout)
	}
}

func setString(p *string, def string) {
	if *p == "" {
		*p = def
	}
}

func setDuration(p *Duration, def Duration) {
	if *p == 0 {
		*p = def
	}
}
