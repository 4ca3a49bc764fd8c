package workflows

import (
	"strconv"
	"time"

	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/repoid"
)

// What travels through Temporal for validity checks (ValidateSecrets):
// secrets by their first finding's id and counts, never a secret, a path
// or a blob id.

// The activities of validity checks (activities.Validity).
const (
	activityListValidation  = "ListValidation"  // ListValidationInput → ValidationPage
	activityValidateSecrets = "ValidateSecrets" // ValidateBatchInput → ValidationCounts (on the repository's worker)
)

// SecretRevalidationScheduleID is the daily schedule that checks every
// open secret again.
const SecretRevalidationScheduleID = "secret-revalidation"

// ValidateSecretsWorkflowID is the id of the check of one shard's secrets
// (0: the fleet's, as the schedule runs it).
func ValidateSecretsWorkflowID(shardID int64) string {
	if shardID == 0 {
		return SecretRevalidationScheduleID
	}
	return "validate:shard:" + strconv.FormatInt(shardID, 10)
}

// ValidationCursor is where a page of secrets ends: the scope and first
// finding of its last secret.
type ValidationCursor struct {
	Scope   int64 `json:"scope,omitempty"`
	Finding int64 `json:"finding,omitempty"`
}

// ListValidationInput asks for a page of secrets to check.
type ListValidationInput struct {
	ShardID    int64            `json:"shardId,omitempty"`
	SecretHash string           `json:"secretHash,omitempty"`
	Unchecked  bool             `json:"unchecked,omitempty"`
	After      ValidationCursor `json:"after,omitzero"`
	Limit      int              `json:"limit"`
	// Batch bounds the secrets of one group (one activity).
	Batch int `json:"batch"`
}

// ValidationGroup is secrets of one repository, checked by one activity on
// the worker holding its mirror.
type ValidationGroup struct {
	ShardID  int64      `json:"shardId"`
	Repo     *repoid.ID `json:"repository,omitempty"`
	Location string     `json:"location,omitempty"`
	Findings []int64    `json:"findings"`
}

// ValidationPage is a page of groups. Enabled is false when the worker's
// settings send no check (GITFLEET_VALIDATE is not on): the page is then
// empty.
type ValidationPage struct {
	Enabled bool              `json:"enabled"`
	Groups  []ValidationGroup `json:"groups,omitempty"`
	Next    ValidationCursor  `json:"next,omitzero"`
	More    bool              `json:"more,omitempty"`
}

// ValidateBatchInput is one group to check.
type ValidateBatchInput struct {
	ShardID  int64   `json:"shardId"`
	Findings []int64 `json:"findings"`
}

// ValidationCounts count checks by what they found.
type ValidationCounts struct {
	Checked int `json:"checked"`
	Valid   int `json:"valid"`
	Invalid int `json:"invalid"`
	Unknown int `json:"unknown"`
	// Revoked: seen valid before, invalid now.
	Revoked int `json:"revoked"`
	// NotChecked: secrets of repositories whose activity failed (the next
	// run checks them).
	NotChecked int `json:"notChecked,omitempty"`
}

// Add adds o to c.
func (c *ValidationCounts) Add(o ValidationCounts) {
	c.Checked += o.Checked
	c.Valid += o.Valid
	c.Invalid += o.Invalid
	c.Unknown += o.Unknown
	c.Revoked += o.Revoked
	c.NotChecked += o.NotChecked
}

// validateOptions: a group's checks, paced by the providers' limits; the
// activity heartbeats after each secret.
var validateOptions = func() workflow.ActivityOptions {
	o := gitOptions
	o.StartToCloseTimeout = 30 * time.Minute
	o.HeartbeatTimeout = 2 * time.Minute
	return o
}()
