// Package normalize is Keel's behaviour normalisation: it makes a request
// behave on the serving model as it would have on the model the caller tuned
// it for.
//
// Two parts:
//   - Parameter normalisation (Params, Table): which sampling parameters
//     (temperature, top_p, top_k) the serving model and API version accept,
//     and what to do with those it does not — drop them, map them to an
//     accepted value, or reject the request with a 400 that names the
//     parameter — so the caller never gets an upstream 400 it cannot
//     understand. Every change is an Action, reported to the caller.
//   - Temperature calibration (Calibration, Fit, Diversity, Set): a monotone
//     piecewise-linear map from the temperature asked of a reference model to
//     the serving model's temperature of equal output diversity, learned by
//     `keel calibrate` from sampled answers and applied when a fallback or an
//     alias change serves the request from another model.
//
// Storage lives in the calstore subpackage (SQLite), so the engine can use
// this package without importing a database driver.
//
// Everything here is pure computation: no I/O, no goroutines, nothing blocks.
// A Table, a Calibration and a Set are immutable once built and safe for
// concurrent use; Params never modifies the request it is given.
package normalize
