//! What machine a benchmark ran on, for the header of its output: the CPU model (from
//! /proc/cpuinfo) and the cores this process may use. Hosts of the same size have differed
//! by up to three times in speed from one day to the next, and a figure read without its
//! host cannot be compared with another.

/// The CPU model and core count, e.g. "AMD EPYC, 2 cores".
pub fn describe() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    describe_cpuinfo(&cpuinfo, cores)
}

/// [`describe`] of the text of /proc/cpuinfo (the first processor's model name).
fn describe_cpuinfo(cpuinfo: &str, cores: usize) -> String {
    let model = cpuinfo
        .lines()
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == "model name").then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    format!("{model}, {cores} cores")
}

#[cfg(test)]
mod tests {
    use super::describe_cpuinfo;

    #[test]
    fn the_first_model_name_and_the_cores() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\n\
                       flags\t\t: fpu sse2\n\nprocessor\t: 1\nmodel name\t: Other\n";
        assert_eq!(describe_cpuinfo(cpuinfo, 2), "AMD EPYC, 2 cores");
        assert_eq!(describe_cpuinfo("", 4), "unknown CPU, 4 cores");
    }
}
