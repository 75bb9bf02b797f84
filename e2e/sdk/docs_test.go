package sdk

import (
	"context"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/resilienthttp/resilient"
	"github.com/resilienthttp/resilient/fakeserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	stripe "github.com/stripe/stripe-go/v85"
)

// hostsRT records the host of every request it passes on (to wire, which
// shows the server each SDK's request as the matrix's harness does).
type hostsRT struct {
	next  http.RoundTripper
	mu    sync.Mutex
	hosts []string
}

func (h *hostsRT) RoundTrip(req *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.hosts = append(h.hosts, req.URL.Host)
	h.mu.Unlock()
	return h.next.RoundTrip(req)
}

// TestDocumentedSetups runs docs/sdks.md's recommended setups as written
// (docs' TestGoBlocksRun checks that the block is this test's code): each
// SDK keeps its default host, and http.DefaultTransport, which NewClient
// sends through, is an in-process fakeserver for this test. Each client
// makes one call that succeeds, with one effect on the server.
func TestDocumentedSetups(t *testing.T) {
	srv := fakeserver.New(fakeserver.WithRoute(fakeserver.Route{Match: "POST /v1/{c}"}))
	defer srv.Close()
	rt := &hostsRT{next: &wire{next: srv.Transport()}}
	saved := http.DefaultTransport
	http.DefaultTransport = rt
	t.Cleanup(func() { http.DefaultTransport = saved })
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("OPENAI_BASE_URL", "")
	require.NoError(t, os.Unsetenv("OPENAI_BASE_URL"))
	cfg := aws.Config{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("https://dynamodb.us-east-1.amazonaws.com/v1/dynamodb"), // the fakeserver's route
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
	}
	key := "sk_test_123"

	// openai-go, and every Stainless SDK (anthropic-sdk-go, …): keep the SDK's retries.
	ai := openai.NewClient(option.WithHTTPClient(resilient.NewClient(resilient.WithOuterRetries(true))))

	// aws-sdk-go-v2, any service: keep the SDK's retryer. (No WithRefusalResponses: AWS retries a 503.)
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.HTTPClient = resilient.NewClient(resilient.WithOuterRetries(true))
	})

	// stripe-go: keep MaxNetworkRetries; it retries network errors, 409s and lock timeouts, never a 5xx or a rate
	// limit whose body is a Stripe error (Stripe replays a 500 under the same key): the Transport sends what it sends.
	// A refused retry is a Stripe error that stripe-go does not retry.
	sc := stripe.NewClient(key, stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		HTTPClient: resilient.NewClient(resilient.WithOuterRetries(true), resilient.WithRefusalResponses()),
	})))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := ai.Completions.New(ctx, openai.CompletionNewParams{
		Model:  openai.CompletionNewParamsModelGPT3_5TurboInstruct,
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Say this is a test")},
	})
	assert.NoError(t, err, "openai-go")
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String("orders"),
		Item:      map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "o-1"}},
	})
	assert.NoError(t, err, "aws-sdk-go-v2")
	_, err = sc.V1Charges.Create(ctx, &stripe.ChargeCreateParams{Amount: stripe.Int64(1000), Currency: stripe.String("usd")})
	assert.NoError(t, err, "stripe-go")

	assert.Equal(t, 3, srv.TotalEffects())
	assert.Equal(t, []string{"api.openai.com", "dynamodb.us-east-1.amazonaws.com", "api.stripe.com"}, rt.hosts)
}
