package temporalcli

// Done is closed when the server process has exited (stopped, or died):
// `starter dev` watches it to restart a server that dies.
func (d *DevServer) Done() <-chan struct{} { return d.proc.Done() }

// Err is the server process's exit error (nil for exit status 0); valid
// once Done is closed.
func (d *DevServer) Err() error { return d.proc.Err() }
