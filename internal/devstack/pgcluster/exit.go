package pgcluster

// Done is closed when the postmaster has exited (stopped, or died):
// `starter dev` watches it to restart a server that dies.
func (c *Cluster) Done() <-chan struct{} { return c.proc.Done() }

// Err is the postmaster's exit error (nil for exit status 0); valid once
// Done is closed.
func (c *Cluster) Err() error { return c.proc.Err() }
