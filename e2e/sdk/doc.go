// Package sdk runs vendor SDKs that retry on their own over resilient.
package sdk
