package aiod

// ConfigFromEnv returns the daemon configuration the AIO_* environment
// variables describe, as aiod's command line reads them. SKELETON.
func ConfigFromEnv() (Config, error) { return Config{}, nil }
