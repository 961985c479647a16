//! `ProtoPlan::visit`: the events a visitor sees for one record — wire order, values in
//! their column's representation, nesting, oneof clearing — and errors as the Arrow path
//! reports them.

use sluice_zeroparser::{Scalar, Visitor};

use crate::support::{telemetry, Enc};

/// Records every event as text.
#[derive(Default)]
struct Log(Vec<String>);

impl<'a> Visitor<'a> for Log {
    fn scalar(&mut self, slot: usize, value: Scalar<'a>) {
        self.0.push(format!("{slot}={value:?}"));
    }
    fn clear(&mut self, slot: usize) {
        self.0.push(format!("clear {slot}"));
    }
    fn element(&mut self, slot: usize, value: Scalar<'a>) {
        self.0.push(format!("{slot}[]={value:?}"));
    }
    fn map_entry(&mut self, slot: usize, key: Scalar<'a>, value: Scalar<'a>) {
        self.0.push(format!("{slot}{{{key:?}}}={value:?}"));
    }
    fn begin_message(&mut self, slot: usize) {
        self.0.push(format!("begin {slot}"));
    }
    fn begin_element(&mut self, slot: usize) {
        self.0.push(format!("begin {slot}[]"));
    }
    fn begin_map_value(&mut self, slot: usize, key: Scalar<'a>) {
        self.0.push(format!("begin {slot}{{{key:?}}}"));
    }
    fn end_message(&mut self) {
        self.0.push("end".into());
    }
}

#[test]
fn a_visitor_sees_every_field_in_wire_order_converted_for_its_column() {
    let (_, plan, _) = telemetry();
    let loc = Enc::new().double(1, 1.5).double(2, -2.0);
    let entry = Enc::new().string(1, "k").string(2, "v");
    let place = Enc::new().message(2, loc.clone()).int(1, 7);
    let record = Enc::new()
        .int(1, 42)
        .string(2, "dev")
        .message(7, loc.clone())
        .string(5, "x")
        .message(6, entry)
        .int(16, 2)
        .string(19, "a")
        .int(20, 9)
        .message(21, loc)
        .message(22, place)
        .build();
    let mut log = Log::default();
    plan.visit(&record, &mut log).expect("valid record");
    let text = log.0.join("; ");
    assert_eq!(
        text,
        "0=Int(42); 1=Str(\"dev\"); begin 6; 0=Double(1.5); 1=Double(-2.0); end; \
         4[]=Str(\"x\"); 5{Str(\"k\")}=Str(\"v\"); 15=Str(\"GATEWAY\"); clear 19; \
         18=Str(\"a\"); clear 18; 19=Int(9); begin 20[]; 0=Double(1.5); 1=Double(-2.0); end; \
         begin 21{Int(7)}; 0=Double(1.5); 1=Double(-2.0); end"
    );
}

#[test]
fn a_visit_error_names_the_field_and_byte_like_the_arrow_path() {
    let (_, plan, mut builder) = telemetry();
    let record = Enc::new().int(1, 1).bytes(2, &[0xff, 0xfe]).build();
    let visited = plan
        .visit(&record, &mut Log::default())
        .expect_err("bad UTF-8");
    let appended = builder.append_proto(&plan, &record).expect_err("bad UTF-8");
    assert_eq!(visited.to_string(), appended.to_string());
    assert_eq!(visited.path().to_string(), "device");
}
