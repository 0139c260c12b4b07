package fastgw

// SetSharedUMEMProbe replaces the shared-UMEM probe until restore is
// called.
func SetSharedUMEMProbe(probe func() error) (restore func()) {
	old := haveSharedUMEM
	haveSharedUMEM = probe
	return func() { haveSharedUMEM = old }
}
