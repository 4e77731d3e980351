package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
	"github.com/keelmesh/keel/internal/wire/bedrock"
)

// BedrockConfig configures an Amazon Bedrock platform.
type BedrockConfig struct {
	// Region is the AWS region the runtime endpoint and the signature
	// name (us-east-1, …); empty: the standard chain's (AWS_REGION,
	// the profile's region).
	Region string
	// Profile names a shared config profile (~/.aws/config); empty: the
	// standard chain's (AWS_PROFILE, else default).
	Profile string
	// APIKey is a Bedrock API key, sent as Authorization: Bearer instead
	// of a SigV4 signature. Empty: AWS_BEARER_TOKEN_BEDROCK when set (as
	// the official SDKs read it), else SigV4 with the standard credential
	// chain.
	APIKey string
	// BaseURL overrides https://bedrock-runtime.{region}.amazonaws.com
	// (a VPC endpoint, a test server).
	BaseURL string
	// Credentials, when set, replaces the standard chain (tests).
	Credentials aws.CredentialsProvider
}

// Bedrock is Amazon Bedrock's InvokeModel and
// InvokeModelWithResponseStream for Anthropic models
// (docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_InvokeModel.html):
// POST {base}/model/{modelId}/invoke or /invoke-with-response-stream,
// signed with AWS Signature V4 (service "bedrock") by the AWS SDK's signer
// over credentials from the standard chain (environment, shared config
// and profiles, web identity, container and instance roles), or
// authenticated by a Bedrock API key. Model ids are Bedrock's:
// anthropic.claude-…-v1:0, or a cross-region inference profile
// (us.anthropic.…, eu.…, global.…). Safe for concurrent use.
type Bedrock struct {
	region string
	base   string
	bearer string // "Bearer <key>", or "" for SigV4
	creds  aws.CredentialsProvider
	signer *v4.Signer
}

// NewBedrock resolves cfg: the region and the credential chain are read
// now (files and environment, no network); credentials are fetched at
// the first call or Check, and cached until they expire.
func NewBedrock(ctx context.Context, cfg BedrockConfig) (*Bedrock, error) {
	b := &Bedrock{region: cfg.Region, signer: v4.NewSigner()}
	key := cfg.APIKey
	if key == "" {
		key = os.Getenv("AWS_BEARER_TOKEN_BEDROCK")
	}
	if cfg.Credentials != nil {
		b.creds = aws.NewCredentialsCache(cfg.Credentials)
	}
	if b.creds == nil && key == "" || b.region == "" {
		var opts []func(*awsconfig.LoadOptions) error
		if cfg.Region != "" {
			opts = append(opts, awsconfig.WithRegion(cfg.Region))
		}
		if cfg.Profile != "" {
			opts = append(opts, awsconfig.WithSharedConfigProfile(cfg.Profile))
		}
		ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
		if err != nil {
			return nil, fmt.Errorf("loading the AWS configuration: %w", err)
		}
		if b.creds == nil {
			b.creds = ac.Credentials
		}
		b.region = ac.Region
	}
	if b.region == "" {
		return nil, errors.New("no AWS region: set bedrock.region, AWS_REGION or the profile's region")
	}
	if key != "" {
		b.bearer = "Bearer " + key
	} else if b.creds == nil {
		return nil, errors.New("no AWS credentials chain")
	}
	b.base = strings.TrimRight(cfg.BaseURL, "/")
	if b.base == "" {
		b.base = "https://bedrock-runtime." + b.region + ".amazonaws.com"
	}
	return b, nil
}

// Name implements Platform.
func (*Bedrock) Name() string { return "bedrock" }

// DefaultVersion implements Platform: bedrock-2023-05-31.
func (*Bedrock) DefaultVersion() string { return bedrock.DefaultVersion }

// KeepsStream implements Platform: Bedrock refuses "stream" in the body
// (the operation says it) — a ValidationException "extraneous key".
func (*Bedrock) KeepsStream() bool { return false }

// BetasInBody implements Platform: Bedrock takes betas as anthropic_beta
// in the body (model-parameters-anthropic-claude-messages.html).
func (*Bedrock) BetasInBody() bool { return true }

// CallURL implements Platform.
func (b *Bedrock) CallURL(model string, stream bool) string {
	op := "/invoke"
	if stream {
		op = "/invoke-with-response-stream"
	}
	return b.base + "/model/" + url.PathEscape(model) + op
}

// PostURL implements Platform: Bedrock's Messages API has no token count
// (its CountTokens operation takes another body), so side calls go to
// other endpoints.
func (*Bedrock) PostURL(string, string) string { return "" }

// Authorize implements Platform: a Bedrock API key as a bearer token, or
// a SigV4 signature of the request as it stands (the headers set so far,
// the body's SHA-256), by the AWS SDK's signer.
func (b *Bedrock) Authorize(ctx context.Context, req *http.Request, body []byte) error {
	if b.bearer != "" {
		req.Header["Authorization"] = []string{b.bearer}
		return nil
	}
	creds, err := b.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("getting AWS credentials: %w", err)
	}
	sum := sha256.Sum256(body)
	var hx [64]byte
	hex.Encode(hx[:], sum[:])
	return b.signer.SignHTTP(ctx, creds, req, string(hx[:]), "bedrock", b.region, time.Now())
}

// NewStreamReader implements Platform: the eventstream framing.
func (*Bedrock) NewStreamReader(r io.Reader) wire.StreamReader { return bedrock.NewStreamReader(r) }

// ParseError implements Platform: x-amzn-ErrorType and {"message": …}.
func (*Bedrock) ParseError(status int, h http.Header, body []byte) *llm.APIError {
	return bedrock.ParseError(status, h, body)
}

// Check implements Platform: the credentials are fetched (a Bedrock API
// key needs nothing).
func (b *Bedrock) Check(ctx context.Context) error {
	if b.bearer != "" {
		return nil
	}
	if _, err := b.creds.Retrieve(ctx); err != nil {
		return fmt.Errorf("getting AWS credentials: %w", err)
	}
	return nil
}
