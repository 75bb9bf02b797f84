package sdk

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	vault "github.com/hashicorp/vault/api"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/opensearch-project/opensearch-go/v4"
	"github.com/opensearch-project/opensearch-go/v4/opensearchapi"
	openaiv1 "github.com/sashabaranov/go-openai"
)

// The unmarked SDK calls, each at the SDK's default retries, plugged in as
// a new user would: the SDK's own HTTP option given the *http.Client (or
// its Transport, where the SDK takes a RoundTripper). No backoff is
// shortened: the bubble's clock is virtual.

// okJSON is a success answer with a JSON body.
func okJSON(status int, body string, headers ...string) func(*http.Request) *http.Response {
	return func(*http.Request) *http.Response {
		h := http.Header{"Content-Type": {"application/json"}}
		for _, kv := range headers {
			k, v, _ := strings.Cut(kv, ":")
			h.Set(k, strings.TrimSpace(v))
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)), ProtoMajor: 1, ProtoMinor: 1}
	}
}

// openSearch: opensearch-go's index call, PUT; 3 retries of 502/503/504,
// the same *http.Request re-sent at once; the SDK takes a RoundTripper.
var openSearch = uclient{name: "opensearch-go v4.8.1 Index (PUT)", loops: true,
	call: func(req *http.Request) bool { return req.Method == http.MethodPut },
	ok:   okJSON(201, `{"_index":"idx","_id":"1","_version":1,"result":"created","_shards":{"total":1,"successful":1,"failed":0},"_seq_no":0,"_primary_term":1}`),
	do: func(ctx context.Context, hc *http.Client, base string) error {
		c, err := opensearchapi.NewClient(opensearchapi.Config{Client: opensearch.Config{Addresses: []string{base}, Transport: hc.Transport}})
		if err != nil {
			return err
		}
		defer c.Close() // its background pollers
		_, err = c.Index(ctx, opensearchapi.IndexReq{Index: "idx", DocumentID: "1", Body: strings.NewReader(`{"title":"a"}`)})
		return err
	}}

// vaultKV: HashiCorp Vault's API client (on go-retryablehttp), a write,
// PUT; 2 retries of 5xx and 429.
var vaultKV = uclient{name: "vault/api v1.23.0 Logical().Write (PUT)", loops: true,
	ok: okJSON(204, ""),
	do: func(ctx context.Context, hc *http.Client, base string) error {
		cfg := vault.DefaultConfig()
		cfg.Address, cfg.HttpClient = base, hc
		c, err := vault.NewClient(cfg)
		if err != nil {
			return err
		}
		c.SetToken("s.test")
		_, err = c.Logical().WriteWithContext(ctx, "secret/app", map[string]any{"password": "p"})
		return err
	}}

// azureKey is the test account's Shared Key.
var azureKey = base64.StdEncoding.EncodeToString([]byte("resilient-test-account-key-0123"))

// azureBlob: azblob's upload, PUT, each try a copy of the request signed
// anew (Shared Key); 3 retries, honours Retry-After.
var azureBlob = uclient{name: "azblob v1.8.3 UploadBuffer (PUT)", loops: true,
	ok:    okJSON(201, "", "ETag: \"0x1\"", "Last-Modified: Mon, 02 Jan 2006 15:04:05 GMT", "x-ms-request-server-encrypted: true"),
	check: checkSharedKey("devaccount", azureKey),
	do: func(ctx context.Context, hc *http.Client, base string) error {
		cred, err := azblob.NewSharedKeyCredential("devaccount", azureKey)
		if err != nil {
			return err
		}
		c, err := azblob.NewClientWithSharedKeyCredential(base+"/devaccount", cred,
			&azblob.ClientOptions{ClientOptions: azcore.ClientOptions{Transport: hc}})
		if err != nil {
			return err
		}
		_, err = c.UploadBuffer(ctx, "cont", "blob.txt", []byte("hello, blob"), nil)
		return err
	}}

// minioPut: minio-go's PutObject, PUT, each try a new request signed anew
// with a streamed, chunk-signed body (SigV4 streaming over plain HTTP);
// 10 attempts; the SDK takes a RoundTripper.
var minioPut = uclient{name: "minio-go v7.4.1 PutObject (PUT)", loops: true,
	ok:    okJSON(200, "", "ETag: \"abc\""),
	check: checkSigV4("AKIDMINIO", "minio-secret"),
	do: func(ctx context.Context, hc *http.Client, base string) error {
		c, err := minio.New(strings.TrimPrefix(base, "http://"), &minio.Options{
			Creds: credentials.NewStaticV4("AKIDMINIO", "minio-secret", ""), Region: "us-east-1", Transport: hc.Transport})
		if err != nil {
			return err
		}
		data := []byte("hello, object")
		_, err = c.PutObject(ctx, "bucket", "object.txt", bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
		return err
	}}

// goOpenAI: sashabaranov/go-openai, a chat completion, POST; it retries
// nothing.
var goOpenAI = uclient{name: "go-openai v1.43.0 CreateChatCompletion (POST)", loops: false,
	ok: okJSON(200, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`),
	do: func(ctx context.Context, hc *http.Client, base string) error {
		cfg := openaiv1.DefaultConfig("sk-test")
		cfg.BaseURL, cfg.HTTPClient = base+"/v1", hc
		_, err := openaiv1.NewClientWithConfig(cfg).CreateChatCompletion(ctx, openaiv1.ChatCompletionRequest{
			Model: "gpt-4o-mini", Messages: []openaiv1.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
		return err
	}}

// handLoop: a hand-written loop, 3 tries of a fresh POST, 100 ms apart, no
// headers, on an error, a 429 or a 5xx.
var handLoop = uclient{name: "hand-written loop, 3 tries of a fresh POST", loops: true,
	ok: okJSON(201, `{"id":"o1"}`),
	do: func(ctx context.Context, hc *http.Client, base string) error {
		var last error
		for i := range 3 {
			if i > 0 {
				time.Sleep(100 * time.Millisecond)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/orders", strings.NewReader(`{"sku":"a","n":1}`))
			if err != nil {
				return err
			}
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
			last = fmt.Errorf("%w %d", errStatus, resp.StatusCode)
			if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500 {
				return last
			}
		}
		return last
	}}
