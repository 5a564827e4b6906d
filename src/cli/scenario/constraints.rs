//! Bodies named by constraints, and the `[[constraint]]` tables.

use std::ops::Range;

use toml::{Spanned, Value};

use super::parser::{RawConstraint, number};
use super::*;
use crate::cli::CliError;
use crate::cli::prescribed::PrescribedSpec;
use crate::cli::sample::Scalar;

impl Parser<'_> {
    /// A body by name: an index into the free bodies, then (when `plane`) the prescribed ones
    /// after them; `None` for Ground (when `plane`).
    pub(super) fn body_ref(
        &self,
        name: &Spanned<String>,
        bodies: &[BodySpec],
        prescribed: &[PrescribedSpec],
        field: &str,
        ground: bool,
    ) -> Result<Option<usize>, CliError> {
        if ground && name.get_ref() == "ground" {
            return Ok(None);
        }
        let driven = prescribed.iter().position(|b| &b.name == name.get_ref());
        match bodies.iter().position(|b| &b.name == name.get_ref()) {
            Some(k) => Ok(Some(k)),
            None if ground && driven.is_some() => Ok(driven.map(|k| bodies.len() + k)),
            None => {
                let mut names: Vec<&str> = bodies.iter().map(|b| b.name.as_str()).collect();
                if ground {
                    names.extend(prescribed.iter().map(|b| b.name.as_str()));
                } else if driven.is_some() {
                    return Err(self.loc.at(
                        name.span(),
                        field,
                        format!(
                            "{:?} is a prescribed body; accepted: a free body's name {names:?} \
                             (a prescribed body can only carry the plane)",
                            name.get_ref()
                        ),
                    ));
                }
                Err(self.loc.at(
                    name.span(),
                    field,
                    format!(
                        "{:?} is not a body; accepted: {}{names:?}",
                        name.get_ref(),
                        if ground {
                            "\"ground\" or one of "
                        } else {
                            "one of "
                        }
                    ),
                ))
            }
        }
    }

    /// `contact`, `restitution` and `friction` of a sphere-on-plane or point-on-plane table
    /// (both have the rows of a contact: the normal and the two slip rows): `None` for a
    /// bilateral contact (the default), the coefficients of a unilateral one. A unilateral
    /// contact takes no `rolling` (friction decides the mode); fixed coefficients and bounded
    /// draws (`Parser::bounded_in`) are checked here, unbounded draws per instance by the dry
    /// pass.
    fn unilateral(
        &mut self,
        k: usize,
        c: &RawConstraint,
    ) -> Result<Option<UnilateralSpec>, CliError> {
        let field = |f: &str| format!("constraint[{k}].{f}");
        let unilateral = match &c.contact {
            None => false,
            Some(v) => match v.get_ref().as_str() {
                "bilateral" => false,
                "unilateral" => true,
                other => {
                    return Err(self.loc.at(
                        v.span(),
                        field("contact"),
                        format!(
                            "{other:?}; accepted: \"bilateral\" (the default) or \"unilateral\""
                        ),
                    ));
                }
            },
        };
        if !unilateral {
            for (name, v) in [("restitution", &c.restitution), ("friction", &c.friction)] {
                if let Some(v) = v {
                    return Err(self.loc.at(
                        v.span(),
                        field(name),
                        "applies only to a unilateral contact; accepted with contact = \"unilateral\"",
                    ));
                }
            }
            return Ok(None);
        }
        if let Some(v) = &c.rolling {
            return Err(self.loc.at(
                v.span(),
                field("rolling"),
                "does not apply to a unilateral contact (friction decides whether it rolls); \
                 accepted: no rolling key with contact = \"unilateral\"",
            ));
        }
        let restitution = match &c.restitution {
            Some(v) => {
                let s = self.scalar(v, &field("restitution"))?;
                self.bounded_in(
                    v,
                    &field("restitution"),
                    &s,
                    (0.0, 1.0),
                    "a number in [0, 1]",
                )?;
                s
            }
            None => Scalar::Fixed(0.0),
        };
        let friction = match &c.friction {
            None => FrictionSpec::Single(Scalar::Fixed(0.0)),
            Some(v) => match v.get_ref() {
                Value::Table(t) if t.contains_key("static") || t.contains_key("dynamic") => {
                    let part = |p: &mut Self, name: &str| -> Result<Scalar, CliError> {
                        let value = t.get(name).ok_or_else(|| {
                            p.loc.at(
                                v.span(),
                                field("friction"),
                                format!(
                                    "missing {name}; accepted: {{ static = μs, dynamic = μd }}"
                                ),
                            )
                        })?;
                        let spanned = Spanned::new(v.span(), value.clone());
                        let s = p.scalar(&spanned, &field(&format!("friction.{name}")))?;
                        p.bounded_in(
                            v,
                            &field(&format!("friction.{name}")),
                            &s,
                            (0.0, f64::INFINITY),
                            "a number ≥ 0",
                        )?;
                        Ok(s)
                    };
                    if let Some(extra) = t.keys().find(|k| *k != "static" && *k != "dynamic") {
                        return Err(self.loc.at(
                            v.span(),
                            field("friction"),
                            format!(
                                "unknown key {extra:?}; accepted: {{ static = μs, dynamic = μd }}"
                            ),
                        ));
                    }
                    let (mu_static, mu_dynamic) = (part(self, "static")?, part(self, "dynamic")?);
                    if let (Scalar::Fixed(s), Scalar::Fixed(d)) = (&mu_static, &mu_dynamic)
                        && s < d
                    {
                        return Err(self.loc.at(
                            v.span(),
                            field("friction"),
                            format!("static {s} < dynamic {d}; accepted: static ≥ dynamic ≥ 0"),
                        ));
                    }
                    FrictionSpec::Split {
                        mu_static,
                        mu_dynamic,
                    }
                }
                _ => {
                    let s = self.scalar(v, &field("friction"))?;
                    self.bounded_in(
                        v,
                        &field("friction"),
                        &s,
                        (0.0, f64::INFINITY),
                        "a number ≥ 0, or { static = μs, dynamic = μd }",
                    )?;
                    FrictionSpec::Single(s)
                }
            },
        };
        Ok(Some(UnilateralSpec {
            restitution,
            friction,
        }))
    }

    pub(super) fn constraint(
        &mut self,
        k: usize,
        c: &RawConstraint,
        bodies: &[BodySpec],
        prescribed: &[PrescribedSpec],
    ) -> Result<ConstraintSpec, CliError> {
        let field = |f: &str| format!("constraint[{k}].{f}");
        let kind = c.kind.get_ref().as_str();
        let allowed: &[&str] = match kind {
            "sphere_on_plane" => &[
                "rolling",
                "radius",
                "sphere_center",
                "incline_deg",
                "plane_origin",
                "plane",
                "contact",
                "restitution",
                "friction",
            ],
            "point_on_plane" => &[
                "follower_point",
                "incline_deg",
                "plane_origin",
                "plane",
                "contact",
                "restitution",
                "friction",
            ],
            "point_to_ground" => &["point", "normals", "baumgarte_time"],
            other => {
                return Err(self.loc.at(
                    c.kind.span(),
                    field("kind"),
                    format!(
                        "{other:?}; accepted: sphere_on_plane, point_on_plane, point_to_ground"
                    ),
                ));
            }
        };
        let present: [(&str, Option<Range<usize>>); 13] = [
            ("contact", c.contact.as_ref().map(Spanned::span)),
            ("restitution", c.restitution.as_ref().map(Spanned::span)),
            ("friction", c.friction.as_ref().map(Spanned::span)),
            ("plane", c.plane.as_ref().map(Spanned::span)),
            ("rolling", c.rolling.as_ref().map(Spanned::span)),
            ("radius", c.radius.as_ref().map(Spanned::span)),
            ("sphere_center", c.sphere_center.as_ref().map(Spanned::span)),
            ("incline_deg", c.incline_deg.as_ref().map(Spanned::span)),
            ("plane_origin", c.plane_origin.as_ref().map(Spanned::span)),
            (
                "follower_point",
                c.follower_point.as_ref().map(Spanned::span),
            ),
            ("point", c.point.as_ref().map(Spanned::span)),
            ("normals", c.normals.as_ref().map(Spanned::span)),
            (
                "baumgarte_time",
                c.baumgarte_time.as_ref().map(Spanned::span),
            ),
        ];
        for (name, span) in present {
            if let Some(span) = span
                && !allowed.contains(&name)
            {
                return Err(self.loc.at(
                    span,
                    field(name),
                    format!(
                        "does not apply to {kind}; accepted fields: kind, body, {}",
                        allowed.join(", ")
                    ),
                ));
            }
        }
        let body = self
            .body_ref(&c.body, bodies, prescribed, &field("body"), false)?
            .ok_or_else(|| {
                self.loc.at(
                    c.body.span(),
                    field("body"),
                    "\"ground\"; accepted: a free body's name",
                )
            })?;
        let plane = match &c.plane {
            Some(p) => self.body_ref(p, bodies, prescribed, &field("plane"), true)?,
            None => None,
        };
        if plane == Some(body) {
            return Err(self.loc.at(
                c.plane.as_ref().map_or(0..0, |p| p.span()),
                field("plane"),
                "the plane and the body are the same; accepted: \"ground\" or another body",
            ));
        }
        let zero3 = || [Scalar::Fixed(0.0), Scalar::Fixed(0.0), Scalar::Fixed(0.0)];
        let opt3 = |p: &mut Self, v: &Option<Spanned<Value>>, f: &str| match v {
            Some(v) => p.vec3(v, &field(f)),
            None => Ok(zero3()),
        };
        let incline = match &c.incline_deg {
            Some(v) => self.scalar(v, &field("incline_deg"))?,
            None => Scalar::Fixed(0.0),
        };
        Ok(match kind {
            "sphere_on_plane" => {
                let unilateral = self.unilateral(k, c)?;
                let rolling = match &c.rolling {
                    None => Flag::Fixed(false),
                    Some(v) => match v.get_ref() {
                        Value::Boolean(b) => Flag::Fixed(*b),
                        Value::Table(t)
                            if t.len() == 1
                                && t.get("choice").and_then(Value::as_array).is_some_and(|a| {
                                    a.len() == 2
                                        && a.iter()
                                            .filter_map(Value::as_bool)
                                            .collect::<Vec<_>>()
                                            .len()
                                            == 2
                                        && a[0] != a[1]
                                }) =>
                        {
                            Flag::Either
                        }
                        _ => {
                            return Err(self.loc.at(
                                v.span(),
                                field("rolling"),
                                "accepted: true, false, or {choice = [true, false]}",
                            ));
                        }
                    },
                };
                let radius = match &c.radius {
                    Some(v) => self.positive(v, &field("radius"))?,
                    None => {
                        return Err(self.loc.at(
                            c.kind.span(),
                            field("radius"),
                            "missing; accepted: a scalar > 0",
                        ));
                    }
                };
                ConstraintSpec::SphereOnPlane {
                    plane,
                    body,
                    rolling,
                    radius,
                    sphere_center: opt3(self, &c.sphere_center, "sphere_center")?,
                    incline_deg: incline,
                    plane_origin: opt3(self, &c.plane_origin, "plane_origin")?,
                    unilateral,
                }
            }
            "point_on_plane" => ConstraintSpec::PointOnPlane {
                unilateral: self.unilateral(k, c)?,
                plane,
                body,
                follower_point: opt3(self, &c.follower_point, "follower_point")?,
                incline_deg: incline,
                plane_origin: opt3(self, &c.plane_origin, "plane_origin")?,
            },
            _ => {
                const ACCEPTED: &str =
                    "an array of 1 to 3 unit vectors [x, y, z], mutually orthogonal";
                let normals = match &c.normals {
                    None => vec![[0.0, 0.0, 1.0]],
                    Some(v) => {
                        let parsed: Option<Vec<[f64; 3]>> = v.get_ref().as_array().and_then(|a| {
                            a.iter()
                                .map(|n| {
                                    let xs: Option<Vec<f64>> =
                                        n.as_array()?.iter().map(number).collect();
                                    xs.and_then(|xs| <[f64; 3]>::try_from(xs).ok())
                                })
                                .collect()
                        });
                        match parsed.filter(|n| (1..=3).contains(&n.len())) {
                            Some(n) => n,
                            None => {
                                return Err(self.loc.at(
                                    v.span(),
                                    field("normals"),
                                    format!("accepted: {ACCEPTED}"),
                                ));
                            }
                        }
                    }
                };
                if let Err(e) = crate::constraints::PointToGround::new(
                    crate::model::BodyId::new(1),
                    [0.0; 3],
                    &normals,
                ) {
                    return Err(self.loc.at(
                        c.normals.as_ref().map_or(c.kind.span(), |n| n.span()),
                        field("normals"),
                        format!("{e}; accepted: {ACCEPTED}"),
                    ));
                }
                ConstraintSpec::PointToGround {
                    body,
                    point: opt3(self, &c.point, "point")?,
                    normals,
                    baumgarte_time: match &c.baumgarte_time {
                        Some(v) => Some(self.positive(v, &field("baumgarte_time"))?),
                        None => None,
                    },
                }
            }
        })
    }
}
