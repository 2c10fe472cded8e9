package config

// commonBackendKeys are the keys of every backend mapping that config reads
// itself; the rest are the type's own options.
var commonBackendKeys = []string{"type", "models", "callTimeout", "stallTimeout", "billing", "unpricedModel", "sandbox"}
