//! Fine-tuning: a run that starts from another run's weights (`train.init_from`), keeps named
//! parameter groups fixed (`train.freeze`), and with LoRA adapters (`model.lora_rank` > 0)
//! trains the adapters alone.
//!
//! Parameters are named by their path in the module tree, as Burn's records name them
//! (`layers.0.self_attention.query.weight`; the variant of an enum module is left out). A
//! freeze group is a path or a prefix of paths (`embedding`, `layers.0`,
//! `layers.1.feed_forward`). A frozen parameter gets no gradient, so no optimizer, clipping or
//! weight decay touches it (the decay skips parameters that do not require a gradient).
//!
//! Weights are copied path by path after checking every shape, so a mismatch is an error
//! naming the parameter and both shapes, never a panic inside Burn's record loader; the new
//! model's adapters (absent from a base run) keep their fresh initialization.

use std::collections::HashMap;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};

/// The path segment that marks a LoRA adapter's parameters.
const ADAPTERS: &str = "adapters";

/// Tracks the module path during a visit or a map.
#[derive(Default)]
struct PathStack(Vec<String>);

impl PathStack {
    fn enter(&mut self, name: &str, container: &str) {
        // An enum module's variant is not a level of the record's names.
        if !container.starts_with("Enum:") {
            self.0.push(name.to_string());
        }
    }
    fn exit(&mut self, container: &str) {
        if !container.starts_with("Enum:") {
            self.0.pop();
        }
    }
    fn leaf(&self, index: usize) -> String {
        // Burn calls `enter_module` for the field of a parameter too; a bare parameter at the
        // root (never here) would be named by its position.
        if self.0.is_empty() {
            format!("#{index}")
        } else {
            self.0.join(".")
        }
    }
}

/// One parameter: its path, shape, and whether it trains.
#[derive(Clone, Debug, PartialEq)]
pub struct ParamInfo {
    pub path: String,
    pub shape: Vec<usize>,
    pub trainable: bool,
}

struct Lister {
    stack: PathStack,
    found: Vec<ParamInfo>,
    values: Option<HashMap<String, TensorData>>,
}

impl<B: Backend> ModuleVisitor<B> for Lister {
    fn enter_module(&mut self, name: &str, container: &str) {
        self.stack.enter(name, container);
    }
    fn exit_module(&mut self, _name: &str, container: &str) {
        self.stack.exit(container);
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let value = param.val();
        let path = self.stack.leaf(self.found.len());
        if let Some(values) = &mut self.values {
            values.insert(path.clone(), value.clone().into_data());
        }
        self.found.push(ParamInfo { path, shape: value.dims().to_vec(), trainable: value.is_require_grad() });
    }
}

/// Every float parameter of `module`, in visiting order.
pub fn parameters<B: Backend, M: Module<B>>(module: &M) -> Vec<ParamInfo> {
    let mut lister = Lister { stack: PathStack::default(), found: Vec::new(), values: None };
    module.visit(&mut lister);
    lister.found
}

/// Every float parameter of `module` with its path and values, in visiting order.
pub fn named_values<B: Backend, M: Module<B>>(module: &M) -> Vec<(String, TensorData)> {
    let mut lister = Lister { stack: PathStack::default(), found: Vec::new(), values: Some(HashMap::new()) };
    module.visit(&mut lister);
    let mut values = lister.values.unwrap_or_default();
    lister.found.into_iter().filter_map(|p| values.remove(&p.path).map(|v| (p.path, v))).collect()
}

/// `(trainable, total)` parameter counts of `module`.
pub fn param_counts<B: Backend, M: Module<B>>(module: &M) -> (u64, u64) {
    let params = parameters(module);
    let size = |p: &ParamInfo| p.shape.iter().product::<usize>() as u64;
    (params.iter().filter(|p| p.trainable).map(size).sum(), params.iter().map(size).sum())
}

/// Why weights could not be copied from one model into another.
#[derive(Debug, Clone, PartialEq)]
pub enum CopyError {
    /// The same parameter with different shapes: (path, theirs, ours).
    Shape(String, Vec<usize>, Vec<usize>),
    /// A parameter of the new model (not an adapter) that the source lacks.
    Missing(String),
    /// A parameter of the source that the new model lacks.
    Extra(String),
}

impl std::fmt::Display for CopyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CopyError::Shape(path, theirs, ours) => write!(f, "parameter {path} is {theirs:?} there and {ours:?} here"),
            CopyError::Missing(path) => write!(f, "parameter {path} of this model is not in that run"),
            CopyError::Extra(path) => write!(f, "parameter {path} of that run is not in this model"),
        }
    }
}

struct Copier {
    stack: PathStack,
    index: usize,
    source: HashMap<String, TensorData>,
    errors: Vec<CopyError>,
}

impl<B: Backend> ModuleMapper<B> for Copier {
    fn enter_module(&mut self, name: &str, container: &str) {
        self.stack.enter(name, container);
    }
    fn exit_module(&mut self, _name: &str, container: &str) {
        self.stack.exit(container);
    }
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let path = self.stack.leaf(self.index);
        self.index += 1;
        let Some(data) = self.source.remove(&path) else {
            if !path.split('.').any(|s| s == ADAPTERS) {
                self.errors.push(CopyError::Missing(path));
            }
            return param;
        };
        let (id, tensor, mapper) = param.consume();
        if data.shape.as_slice() != tensor.dims().as_slice() {
            self.errors.push(CopyError::Shape(path, data.shape.to_vec(), tensor.dims().to_vec()));
            return Param::from_mapped_value(id, tensor, mapper);
        }
        let copied = Tensor::<B, D>::from_data(data, &tensor.device()).set_require_grad(tensor.is_require_grad());
        Param::from_mapped_value(id, copied, mapper)
    }
}

/// `target` with every parameter's value taken from the parameter of the same path in
/// `source` (shapes checked first); the target's adapters keep their values, and each
/// parameter keeps whether it trains.
pub fn copy_weights<B: Backend, S: Module<B>, M: Module<B>>(source: &S, target: M) -> Result<M, Vec<CopyError>> {
    let mut lister = Lister { stack: PathStack::default(), found: Vec::new(), values: Some(HashMap::new()) };
    source.visit(&mut lister);
    set_weights(target, lister.values.unwrap_or_default())
}

/// `target` with the parameter of each path in `values` set to that value (shapes checked);
/// every other parameter but the adapters must be given, and every value must be used.
pub fn set_weights<B: Backend, M: Module<B>>(
    target: M,
    values: HashMap<String, TensorData>,
) -> Result<M, Vec<CopyError>> {
    let mut copier = Copier { stack: PathStack::default(), index: 0, source: values, errors: Vec::new() };
    let copied = target.map(&mut copier);
    let mut errors = copier.errors;
    let mut extra: Vec<String> = copier.source.into_keys().collect();
    extra.sort();
    errors.extend(extra.into_iter().map(CopyError::Extra));
    if errors.is_empty() {
        Ok(copied)
    } else {
        Err(errors)
    }
}

/// Whether `path` belongs to freeze group `group` (the path itself or one of its prefixes).
fn in_group(path: &str, group: &str) -> bool {
    path == group || path.strip_prefix(group).is_some_and(|rest| rest.starts_with('.'))
}

struct Freezer<'a> {
    stack: PathStack,
    index: usize,
    groups: &'a [String],
    adapters_only: bool,
}

impl<B: Backend> ModuleMapper<B> for Freezer<'_> {
    fn enter_module(&mut self, name: &str, container: &str) {
        self.stack.enter(name, container);
    }
    fn exit_module(&mut self, _name: &str, container: &str) {
        self.stack.exit(container);
    }
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<B, D>>) -> Param<Tensor<B, D>> {
        let path = self.stack.leaf(self.index);
        self.index += 1;
        let adapter = path.split('.').any(|s| s == ADAPTERS);
        let frozen = self.groups.iter().any(|g| in_group(&path, g)) || (self.adapters_only && !adapter);
        if frozen {
            param.set_require_grad(false)
        } else {
            param
        }
    }
}

/// `model` with the parameters of `groups` frozen, and with `adapters_only` everything but
/// the LoRA adapters. A group that names no parameter is the error: the groups there are.
pub fn freeze<B: Backend, M: Module<B>>(model: M, groups: &[String], adapters_only: bool) -> Result<M, String> {
    if !groups.is_empty() {
        let params = parameters(&model);
        if let Some(unknown) = groups.iter().find(|g| !params.iter().any(|p| in_group(&p.path, g))) {
            let mut tops: Vec<String> = Vec::new();
            for p in &params {
                let top: Vec<&str> = p.path.split('.').take(2).collect();
                let top = if top.len() == 2 && top[1].parse::<usize>().is_ok() { top.join(".") } else { top[0].into() };
                if !tops.contains(&top) {
                    tops.push(top);
                }
            }
            return Err(format!(
                "{unknown:?} names no parameter; groups are paths or their prefixes: {}",
                tops.join(", ")
            ));
        }
    }
    if groups.is_empty() && !adapters_only {
        return Ok(model);
    }
    Ok(model.map(&mut Freezer { stack: PathStack::default(), index: 0, groups, adapters_only }))
}
