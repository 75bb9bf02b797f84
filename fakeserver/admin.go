package fakeserver

import (
	"encoding/json"
	"io"
	"net/http"
)

// enqueueRequest is the body of POST /_fake/enqueue.
type enqueueRequest struct {
	Match  string  `json:"match"`
	Faults []Fault `json:"faults"`
}

// serveAdmin serves the admin endpoints, which are never faulted nor counted:
//
//	GET  /_fake/scenario          the scenario in force (JSON)
//	PUT  /_fake/scenario          replace it (Scenario JSON); 204, or 400 with the reason
//	POST /_fake/enqueue           {"match": "POST /v1/charges", "faults": [Fault...]}; 204
//	GET  /_fake/stats             the oracles (Stats JSON)
//	GET  /_fake/ledger            the effects ([Entry...])
//	GET  /_fake/effects?key=K     {"key": K, "effects": N}
//	POST /_fake/reset             forget records, ledger and counters; 204
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	route := r.Method + " " + r.URL.Path
	switch route {
	case "GET /_fake/scenario":
		writeJSON(w, http.StatusOK, s.Scenario())
	case "PUT /_fake/scenario", "POST /_fake/scenario":
		sc, err := ReadScenario(io.LimitReader(r.Body, maxBodyBytes))
		if err == nil {
			err = s.SetScenario(sc)
		}
		if err != nil {
			adminProblem(w, http.StatusBadRequest, "invalid-scenario", err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case "POST /_fake/enqueue":
		var req enqueueRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, maxBodyBytes))
		dec.DisallowUnknownFields()
		err := dec.Decode(&req)
		if err == nil {
			err = s.Enqueue(req.Match, req.Faults...)
		}
		if err != nil {
			adminProblem(w, http.StatusBadRequest, "invalid-enqueue", err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case "GET /_fake/stats":
		writeJSON(w, http.StatusOK, s.Stats())
	case "GET /_fake/ledger":
		writeJSON(w, http.StatusOK, s.Ledger())
	case "GET /_fake/effects":
		key := r.URL.Query().Get("key")
		writeJSON(w, http.StatusOK, struct {
			Key     string `json:"key"`
			Effects int    `json:"effects"`
		}{key, s.Effects(key)})
	case "POST /_fake/reset":
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	default:
		adminProblem(w, http.StatusNotFound, "not-found", "no admin endpoint "+route)
	}
}

func adminProblem(w http.ResponseWriter, status int, slug, detail string) {
	p := problemResponse(status, slug, statusTitle(status), detail, "")
	for k, v := range p.header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = w.Write(p.body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		adminProblem(w, http.StatusInternalServerError, "internal", "fakeserver: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
