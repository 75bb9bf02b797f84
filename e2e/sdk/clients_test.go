package sdk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/resilienthttp/resilient"
	stripe "github.com/stripe/stripe-go/v85"
)

// The SDK calls of the matrix, each at the SDK's default retries, and the
// setup the README recommends for it (recommended), as the README shows it.

// openaiGo: openai-go (a Stainless SDK: X-Stainless-Retry-Count, 2
// retries, honours Retry-After-Ms, Retry-After and X-Should-Retry).
var openaiGo = client{"openai-go v3.98.0", func(ctx context.Context, hc *http.Client, base string) error {
	c := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("sk-test"), option.WithHTTPClient(hc))
	_, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModelGPT3_5TurboInstruct,
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Say this is a test")},
	})
	return err
}}

// openaiOwnKey: openai-go with the application's own Idempotency-Key, the
// same on each of the SDK's attempts.
var openaiOwnKey = client{"openai-go, the application's key", func(ctx context.Context, hc *http.Client, base string) error {
	n, _ := ctx.Value(callID{}).(int)
	c := openai.NewClient(option.WithBaseURL(base+"/v1/"), option.WithAPIKey("sk-test"), option.WithHTTPClient(hc),
		option.WithHeader("Idempotency-Key", fmt.Sprintf("order-%d", n)))
	_, err := c.Completions.New(ctx, openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModelGPT3_5TurboInstruct,
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Say this is a test")},
	})
	return err
}}

// dynamoDB: aws-sdk-go-v2's DynamoDB client (amz-sdk-request and
// amz-sdk-invocation-id, 4 attempts).
var dynamoDB = client{"aws-sdk-go-v2 DynamoDB v1.74.0", func(ctx context.Context, hc *http.Client, base string) error {
	c := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(base + "/v1/dynamodb"),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		HTTPClient:   hc,
	})
	_, err := c.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String("orders"),
		Item:      map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "o-1"}},
	})
	return err
}}

// stripeGo: stripe-go (its own Idempotency-Key on every POST, 2 retries,
// no retry count on the wire).
var stripeGo = client{"stripe-go v85.0.0", func(ctx context.Context, hc *http.Client, base string) error {
	sc := stripe.NewClient("sk_test_123", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient:    hc,
		URL:           stripe.String(base),
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})))
	_, err := sc.V1Charges.Create(ctx, &stripe.ChargeCreateParams{Amount: stripe.Int64(1000), Currency: stripe.String("usd")})
	return err
}}

// plainLoop: a hand-written loop without marks or key: 3 attempts, 200 ms
// apart, on an error, a 429 or a 5xx.
var plainLoop = client{"hand-written loop (no marks)", func(ctx context.Context, hc *http.Client, base string) error {
	body := []byte(`{"amount":1000}`)
	var last error
	for i := range 3 {
		if i > 0 {
			time.Sleep(200 * time.Millisecond)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/charges", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 300 {
			return nil
		}
		last = fmt.Errorf("status %d", resp.StatusCode)
		if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
			return last
		}
	}
	return errors.Join(errors.New("attempts used up"), last)
}}

// recommended is the setup the README recommends for each client: its
// options of resilient.NewClient (or resilient.Wrap).
var recommended = map[string]recommendation{
	// A Stainless SDK's marks say it retries; the option says it anyway.
	openaiGo.name:     {"NewClient(WithOuterRetries(true))", []resilient.Option{resilient.WithOuterRetries(true)}},
	openaiOwnKey.name: {"NewClient(WithOuterRetries(true))", []resilient.Option{resilient.WithOuterRetries(true)}},
	// AWS says max=4 on each request; the option says it anyway. No
	// WithRefusalResponses: AWS retries a 503, not an *Error.
	dynamoDB.name: {"NewClient(WithOuterRetries(true))", []resilient.Option{resilient.WithOuterRetries(true)}},
	// stripe-go retries a refusal *Error, not a 503 with a Stripe error
	// body.
	stripeGo.name:  {"NewClient(WithOuterRetries(true), WithRefusalResponses())", []resilient.Option{resilient.WithOuterRetries(true), resilient.WithRefusalResponses()}},
	plainLoop.name: {"NewClient(WithOuterRetries(true))", []resilient.Option{resilient.WithOuterRetries(true)}},
}

type recommendation struct {
	name string
	opts []resilient.Option
}

func (r recommendation) setup() setup { return wrapped(r.name, r.opts...) }
