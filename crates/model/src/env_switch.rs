//! The model's switches read from the environment (`ATTEND_GPU_KERNELS`, `ATTEND_GPU_MATMUL`,
//! `ATTEND_GPU_TILE`, `ATTEND_GPU_FMA`, `ATTEND_GPU_LANES`, `ATTEND_GPU_ADDRESSES`,
//! `ATTEND_GPU_STORES`, `ATTEND_QKV`): each a few spellings, unset or empty meaning the default;
//! anything else is an error that names the variable and the values it takes. `xtask` stops a
//! run on such an error before it starts; the model itself, which reads each variable once
//! where it is first needed, runs the default instead and says so on stderr ([`or_default`]).

/// `value` (trimmed) looked up among `choices`' spellings; an error naming `name` and
/// `expected` where none matches.
pub(crate) fn parse<T: Copy>(name: &str, value: &str, choices: &[(&str, T)], expected: &str) -> Result<T, String> {
    let value = value.trim();
    match choices.iter().find(|(spelling, _)| *spelling == value) {
        Some(&(_, choice)) => Ok(choice),
        None => Err(format!("{name} = {value:?}: expected {expected}")),
    }
}

/// The variable `name` read and given to `parse`; `default` where it is unset, an error naming
/// it and `expected` where it is not UTF-8.
pub(crate) fn read<T>(
    name: &str,
    default: T,
    expected: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<T, String> {
    match std::env::var(name) {
        Err(std::env::VarError::NotPresent) => Ok(default),
        Ok(value) => parse(&value),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!("{name} is not UTF-8: expected {expected}")),
    }
}

/// `setting`, or `default` where it is an error, which is then written to stderr with the
/// default's name `default_name` (each switch's variable is read once, so once a process): a
/// library user who sets a value the runner would refuse is told what runs instead.
pub(crate) fn or_default<T>(setting: Result<T, String>, default: T, default_name: &str) -> T {
    setting.unwrap_or_else(|error| {
        eprintln!("attend-model: {error}; running with the default, {default_name}");
        default
    })
}

/// Runs `work` with `value` as `slot`'s setting on this thread (a switch's per-thread override
/// of the environment: `with_product_tile`, `with_product_form`, `with_gpu_products`), and puts
/// the setting before back after it, even when `work` panics.
pub(crate) fn with_override<T: Copy + 'static, R>(
    slot: &'static std::thread::LocalKey<std::cell::Cell<Option<T>>>,
    value: T,
    work: impl FnOnce() -> R,
) -> R {
    /// Puts the setting before back when dropped.
    struct Restore<T: Copy + 'static>(&'static std::thread::LocalKey<std::cell::Cell<Option<T>>>, Option<T>);
    impl<T: Copy + 'static> Drop for Restore<T> {
        fn drop(&mut self) {
            self.0.with(|cell| cell.set(self.1));
        }
    }
    let _restore = Restore(slot, slot.with(|cell| cell.replace(Some(value))));
    work()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_value_runs_the_default_and_a_taken_one_runs_itself() {
        let choices = [("on", true), ("off", false)];
        let taken = parse("ATTEND_X", " off ", &choices, "on or off");
        assert!(!or_default(taken, true, "on"));
        let refused = parse("ATTEND_X", "maybe", &choices, "on or off");
        assert_eq!(refused, Err("ATTEND_X = \"maybe\": expected on or off".to_string()));
        assert!(or_default(refused, true, "on"));
    }
}
