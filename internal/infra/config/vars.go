package config

import "gitfleet/internal/infra/vcs"

// Vars lists every environment variable Load reads, in a stable order: the
// ones declared here and the host settings vcs.HostsFromEnv reads. A
// deployment (docker-compose.yml, checked by compose_test.go) sets each of
// them or says why not; vars_test.go keeps the list in step with Load.
func Vars() []string {
	return append([]string{
		EnvTemporalAddress,
		EnvTemporalNamespace,
		EnvTemporalUI,
		EnvDatabaseURL,
		EnvMirrorDir,
		EnvWorkerID,
		EnvWorkerOffline,
		EnvMirrorQuota,
		EnvLogLevel,
		EnvLogFormat,
		EnvRules,
		EnvShardLease,
		EnvScanBatch,
		EnvScanDecodeDepth,
		EnvScanArchiveDepth,
		EnvMaxObjectBytes,
		EnvMaxPackBytes,
		EnvSweepEvery,
		EnvCleanupEvery,
		EnvRevalidateEvery,
		EnvDecay,
		EnvSweepMaxRunning,
		EnvHashKey,
		EnvHashKeyFile,
		EnvTokenKey,
		EnvGitHubConcurrency,
		EnvAllowedHosts,
		EnvLocalRoot,
		EnvRetainCollections,
		EnvRetainReceipts,
		EnvRetainOldScopes,
		EnvRetainScans,
		EnvRegistry,
		EnvInsecure,
		EnvRunnerHeartbeat,
		EnvRunnerOffline,
		EnvPullAttempt,
		EnvPullWindow,
		EnvPullQueue,
		EnvPullFanout,
		EnvReconcileEvery,
		EnvSnapshotSources,
		EnvPeerToken,
		EnvActivitySlots,
		EnvControlSlots,
		EnvWorkflowSlots,
		EnvScanParallelism,
		EnvStopTimeout,
		EnvMetricsAddr,
		EnvWebhookAddr,
		EnvWebhookSecret,
		EnvCodeScanning,
		EnvCodeScanningPerHour,
		EnvNotifyURL,
		EnvNotifyPerMinute,
		vcs.EnvAPIURL,
		vcs.EnvToken,
		vcs.EnvHost,
		vcs.EnvGitURL,
		vcs.EnvAllowPlainHTTPToken,
		vcs.EnvAppID,
		vcs.EnvAppKeyFile,
		vcs.EnvTokensFile,
	}, append(secretFileVars(), TemporalEnvVars...)...)
}

// secretFileVars are the VAR_FILE settings of SecretFileVars and the
// database's password file.
func secretFileVars() []string {
	var out []string
	for _, v := range SecretFileVars {
		out = append(out, FileVar(v))
	}
	return append(out, EnvDatabasePasswordFile)
}
