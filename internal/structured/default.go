package structured

// defaultCompiler is Compile's: DefaultLimits, made at package
// initialisation so that its slots belong to no testing/synctest bubble.
var defaultCompiler = NewCompiler(Limits{})
